module github.com/racedecider/leaderelection/postgres

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/jackc/puddle/v2 v2.2.3
	github.com/racedecider/leaderelection v0.0.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/vimeo/go-clocks v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// Until the library is tagged, the backend builds against this checkout.
replace github.com/racedecider/leaderelection => ../

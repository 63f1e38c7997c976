module github.com/racedecider/leaderelection

go 1.26.8

require github.com/vimeo/go-clocks v1.3.0 // indirect

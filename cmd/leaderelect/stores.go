package main

// The store URL schemes leaderelect understands: one blank import per
// backend, each registering its scheme with leaderelection.RegisterScheme.
import (
	_ "github.com/racedecider/leaderelection/azblob"
	_ "github.com/racedecider/leaderelection/dynamodb"
	_ "github.com/racedecider/leaderelection/file"
	_ "github.com/racedecider/leaderelection/gcs"
	_ "github.com/racedecider/leaderelection/kube"
	_ "github.com/racedecider/leaderelection/memory"
	_ "github.com/racedecider/leaderelection/postgres"
	_ "github.com/racedecider/leaderelection/s3"
)

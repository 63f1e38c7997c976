package azblob_test

import (
	"context"
	"crypto/rand"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
)

// Run an election on a blob. The credential comes from Azure's default chain
// (environment, workload or managed identity, Azure CLI); it needs the
// Storage Blob Data Contributor role on the container.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	client, err := container.NewClient("https://myaccount.blob.core.windows.net/elections", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	decider, err := leazblob.NewDecider(client, "report-job")
	if err != nil {
		log.Fatal(err)
	}

	host, _ := os.Hostname()
	candidate := leaderelection.Config{
		Decider:      decider,
		LeaderID:     host + "/" + rand.Text(), // unique per process
		TermLength:   leaderelection.DefaultTermLength,
		MaxClockSkew: leaderelection.DefaultMaxClockSkew,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if !tv.ValueInFuture() {
					return // the term ran out: stop acting at once
				}
				// One unit of leader-only work; downstream systems get
				// tv.Term() as the fencing token and reject older ones.
				log.Printf("leading, term %d", tv.Term())
			}
		},
	}
	// Campaigns until ctx ends; a leader releases its term on the way out.
	if err := candidate.Acquire(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// Open a Decider by URL, as the leaderelect command does. storage_account
// names the account whose key is in AZURE_STORAGE_KEY (or that Azure's
// default credential chain reaches). With AZURE_STORAGE_CONNECTION_STRING set
// instead (Azurite's, for instance), the URL names only the container and
// the blob, azblob://elections/report-job: the connection string names the
// account, and storage_account is then refused.
func Example_url() {
	d, err := leaderelection.OpenDecider(context.Background(), "azblob://elections/report-job?storage_account=myaccount")
	if err != nil {
		log.Fatal(err)
	}
	_ = d // use as Config.Decider
}

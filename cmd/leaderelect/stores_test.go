package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/postgres"
)

// The backends that are modules of their own work from the command line:
// run elects and releases on them, status reads what it left.
func TestModuleStores(t *testing.T) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	t.Run("azblob", func(t *testing.T) {
		cs := testenv.Server(t, "LEADERELECTION_AZURITE_CONNECTION_STRING", "Azurite", `eval "$(scripts/azurite.sh start)"`)
		name := "cli-" + suffix
		c, err := container.NewClientFromConnectionString(cs, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(t.Context(), nil); err != nil {
			t.Fatalf("creating container %s: %v", name, err)
		}
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", cs)
		runAndStatus(t, "azblob://"+name+"/election")
	})
	t.Run("dynamodb", func(t *testing.T) {
		endpoint := testenv.Server(t, "LEADERELECTION_DYNAMODB_ENDPOINT", "DynamoDB Local", `eval "$(scripts/dynamodb-local.sh start)"`)
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
		client := ddb.New(ddb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		table := "cli-" + suffix
		if err := dynamodb.CreateTable(t.Context(), client, table); err != nil {
			t.Fatal(err)
		}
		runAndStatus(t, "dynamodb://"+table+"/election?region=us-east-1&endpoint="+url.QueryEscape(endpoint))
	})
	t.Run("kube", func(t *testing.T) {
		kubeconfig := testenv.Server(t, "LEADERELECTION_KUBECONFIG", "kube-apiserver", `eval "$(scripts/kube-apiserver.sh start)"`)
		t.Setenv("KUBECONFIG", kubeconfig)
		runAndStatus(t, "k8s://default/cli-"+suffix)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Server(t, "LEADERELECTION_POSTGRES_DSN", "PostgreSQL", `eval "$(scripts/postgres.sh start)"`)
		pool, err := pgxpool.New(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		table := "cli_" + suffix
		if err := postgres.CreateTable(t.Context(), pool, table); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		runAndStatus(t, dsn+sep+"table="+table+"&election=job")
	})
}

// runAndStatus runs a command as the leader of store, which must exit 0 once
// the command has, then checks that status shows the released record.
func runAndStatus(t *testing.T, store string) {
	t.Helper()
	var stdout, stderr testenv.SyncBuffer
	done := make(chan outcome, 1)
	go func() {
		done <- dispatch([]string{"run", "--store", store, "--id", "cli-test", "--term=2s", "--skew=200ms", "--", "true"}, &stdout, &stderr)
	}()
	select {
	case o := <-done:
		if o.code != exitOK {
			t.Fatalf("run on %s: exit %+v\n%s", store, o, &stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("run on %s did not finish\n%s", store, &stderr)
	}
	var out, errOut testenv.SyncBuffer
	if o := dispatch([]string{"status", "--store", store}, &out, &errOut); o.code != exitOK ||
		!strings.Contains(out.String(), "cli-test") {
		t.Errorf("status on %s: exit %+v\n%s%s", store, o, &out, &errOut)
	}
}

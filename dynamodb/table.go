package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates a table for elections, keyed on DefaultKeyAttribute
// (a string) with on-demand billing, and waits until it is active. One
// table holds any number of elections, one item each. It fails if the table
// exists already.
//
// Deciders never create tables themselves: a table is infrastructure, whose
// billing mode, encryption and tags belong in whatever manages the rest of
// it (CloudFormation, Terraform). This helper is for tests, examples and
// quick starts.
func CreateTable(ctx context.Context, client *ddb.Client, table string) error {
	if client == nil {
		return errors.New("dynamodb: CreateTable: client is nil")
	}
	if !tableName.MatchString(table) {
		return fmt.Errorf("dynamodb: CreateTable: table %q is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '-', '.')", table)
	}
	_, err := client.CreateTable(ctx, &ddb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(DefaultKeyAttribute), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(DefaultKeyAttribute), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("dynamodb: creating table %q: %w", table, err)
	}
	// A new table takes seconds to become active on AWS; DynamoDB Local
	// creates it at once. The waiter polls DescribeTable with backoff.
	w := ddb.NewTableExistsWaiter(client)
	if err := w.Wait(ctx, &ddb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamodb: waiting for table %q to become active: %w", table, err)
	}
	return nil
}

package dynamodb

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/awscreds"
)

// classify maps an error from a DynamoDB call to the class the engine acts
// on: entry.ErrRaceLost, entry.ErrThrottled, entry.ErrRefused (or an error
// wrapping it that says why), or nil for an unknown outcome. It is the one
// place where DynamoDB's answers are interpreted. Every class but nil means
// the request was not applied.
func classify(err error) error {
	if refusal, fromProvider := awscreds.Answer(err, "DynamoDB"); fromProvider {
		// Not DynamoDB's answer, but the credential provider's: no
		// request was sent. The class carries why.
		if refusal != "" {
			return fmt.Errorf("%w: %s", entry.ErrRefused, refusal)
		}
		return nil
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// No answer from DynamoDB: a timeout, a reset, a cancelled call.
		return nil
	}
	switch ae.ErrorCode() {
	case "ConditionalCheckFailedException":
		return entry.ErrRaceLost
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		// The table's or the account's throughput was exceeded: DynamoDB
		// rejected the request before acting on it.
		return entry.ErrThrottled
	case "ResourceNotFoundException", // the table does not exist (or is not active)
		"AccessDeniedException",               // IAM denies the action on the table
		"UnrecognizedClientException",         // unknown access key or security token
		"InvalidSignatureException",           // wrong secret key
		"MissingAuthenticationTokenException", // unsigned request
		"MissingAuthenticationToken",          // the same, as DynamoDB Local spells it
		"ValidationException",                 // the key does not fit the table's key schema, and the like
		"SerializationException":              // a request DynamoDB cannot parse
		return entry.ErrRefused
	}
	// TransactionConflictException, InternalServerError,
	// ServiceUnavailable, 5xx and anything unforeseen: the request may have
	// been applied.
	return nil
}

// isMissingTable reports whether err says the table does not exist.
func isMissingTable(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ResourceNotFoundException" {
		return true
	}
	return false
}

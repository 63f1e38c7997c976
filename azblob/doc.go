// Package azblob runs leader elections on Azure Blob Storage: one block blob
// per election holds the record, and every write is conditioned on the
// blob's ETag.
//
//	cred, err := azidentity.NewDefaultAzureCredential(nil)
//	...
//	client, err := container.NewClient("https://ACCOUNT.blob.core.windows.net/elections", cred, nil)
//	...
//	d, err := azblob.NewDecider(client, "scheduler")
//	...
//	cfg := leaderelection.Config{Decider: d, LeaderID: id, OnElected: run}
//
// Or, with the blank import of this package, leaderelection.OpenDecider opens
// "azblob://CONTAINER/BLOB?storage_account=NAME" (see Scheme).
//
// # How the record is stored
//
// ReadCurrent downloads the blob (Get Blob) and takes its content, ETag and
// Last-Modified time from the one response; a missing blob reads as
// entry.NoElections, a missing container is refused (entry.ErrRefused).
// WriteEntry stores the whole record with one Put Blob request, never with
// staged blocks, conditioned with If-None-Match: * when it creates the blob
// and If-Match: <ETag> when it replaces it. Blob Storage applies the
// condition atomically, so of any number of writers conditioned on the same
// ETag exactly one succeeds. The others get 412 ConditionNotMet, 409
// BlobAlreadyExists (a create on a blob that exists) or 404 BlobNotFound (an
// If-Match on a blob that is gone), which WriteEntry reports as
// entry.ErrRaceLost. A release is an ordinary conditional write: the blob is
// never deleted. Azure's ETags change on every write, even of identical
// content, so a stale writer cannot match a newer record by accident.
//
// That atomic condition is all the election's safety asks of the store: it
// serialises the writers. The rest (clock assumptions, MaxClockSkew, checking
// the TimeView before acting, fencing with the Term) is the engine's; see the
// leaderelection package documentation.
//
// # Retries and unknown outcomes
//
// A read that fails in a way that may pass (a transport error, a 5xx,
// throttling) is sent again after a jittered pause (50 to 100 ms) under the
// client's retry options, and so retried by the SDK; a refusal is returned at once. Writes are
// sent with the SDK's retries turned off and retried by WriteEntry itself, up
// to four attempts with a jittered backoff, after a transport error or a
// 408, 500, 502, 503 or 504 answer. Retrying a conditional write is safe: an
// attempt that was applied makes every later attempt fail its condition. But
// that failure does not mean the race was lost: the earlier attempt may have
// won it. So WriteEntry reports entry.ErrRaceLost, entry.ErrThrottled or
// entry.ErrRefused only when no earlier attempt of the same call may have
// been applied; otherwise its error is one of unknown outcome, which the
// election engine resolves by reading the record back and looking for the
// write's WriteID. Each ReadCurrent and WriteEntry call, retries included, is
// bounded by DefaultTimeout unless WithTimeout says otherwise.
//
// # What the answers mean
//
// 403 (AuthorizationFailure, AuthorizationPermissionMismatch,
// AuthenticationFailed), 404 ContainerNotFound, an infinite lease held on
// the blob (412 LeaseIdMissing, 409 Lease...), an immutability policy or
// legal hold (409 BlobImmutableDueToPolicy), an archived blob and any other
// 4xx that is not a conflict are refusals: entry.ErrRefused, and Acquire
// ends. 503 ServerBusy (the account or partition is over its request or
// bandwidth limit), 429 and a lease that ends (of fixed duration, within a
// minute unless its holder renews it, or being broken; a write refused for a
// lease asks for the blob's properties to tell) are entry.ErrThrottled,
// retried with backoff. 500 OperationTimedOut, other 5xx
// and transport errors are unknown outcomes. A 2xx answer without an
// x-ms-request-id, which Blob Storage and Azurite send with every answer,
// comes from another web server at the endpoint: a refusal naming it. So is
// a TLS handshake that cannot succeed (plain HTTP on an https:// endpoint, a
// certificate this host does not trust or that names another host): no
// request was sent; one that has expired or is not yet valid, which time
// cures, is an unknown outcome. A token credential that cannot
// get a token is refused before any request is sent: when it has nothing to
// get one with (azidentity reports it unavailable: DefaultAzureCredential
// with no environment credentials, no managed identity and no az login),
// the error says no Azure credentials are available and lists what was
// tried (a managed identity whose probe of the metadata service timed out
// included: that is how a host without one answers, and azidentity probes
// only until the service first answers, so on Azure it can end only a
// start-up); when Microsoft Entra ID refuses it with a 4xx, the error is
// azidentity's. A token credential on an http:// endpoint is refused too:
// azcore sends tokens only over https, and fails every request before
// sending it (use a shared key or a connection string for Azurite). Entra ID
// unreachable, or answering 429 or 5xx, is an unknown
// outcome, retried like a transport error. Errors name the blob as
// azblob://CONTAINER/BLOB and give the HTTP status and Azure error code; they
// never repeat an account key or a SAS token (URLs lose their query string).
//
// # Permissions and account settings
//
// The credential needs to read and write the blob: the Storage Blob Data
// Contributor role, best scoped to the container. The blob must not be under
// a time-based retention (immutability) policy or a legal hold, and nothing
// else should take a lease on it. With blob versioning, every write keeps
// the previous record as a version (the leader writes twice per term), and
// with soft delete, overwritten records are kept as soft-deleted snapshots:
// both add storage cost, so add a lifecycle rule deleting old versions, or
// keep the election in a container of an account without them.
//
// # Clocks
//
// The token's CommitTime is the blob's Last-Modified time, from the write's
// response or the read's: the service's clock, to whole seconds.
//
// # Changes are polled
//
// Blob Storage cannot push a change to a waiting client (Event Grid can, but
// with delays of seconds and infrastructure of its own), so the Decider does
// not implement leaderelection.ChangeNotifier: candidates and watchers poll.
package azblob

// Package s3 is a leaderelection.RaceDecider on Amazon S3 and S3-compatible
// object stores, using S3 conditional writes.
//
// One object holds the election record. ReadCurrent reads it with GetObject
// and uses its ETag as the record's version. WriteEntry replaces it with a
// conditional PutObject: If-None-Match: * for the first write (the object
// must not exist yet), If-Match: <ETag> for every later one. Of any number
// of concurrent writers conditioned on the same ETag, S3 accepts one and
// refuses the others with 412 Precondition Failed (or 409
// ConditionalRequestConflict), which WriteEntry reports as entry.ErrRaceLost.
// A release is such a conditional write too; the object is never deleted.
//
// # Creating a Decider
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	client := s3.NewFromConfig(cfg)
//	d, err := les3.NewDecider(client, "my-bucket", "elections/my-job")
//
// For an S3-compatible store (MinIO, Cloudflare R2, versitygw, ...), set the
// endpoint and, for most of them, path-style addressing on the client:
//
//	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
//		o.BaseEndpoint = aws.String("https://minio.internal:9000")
//		o.UsePathStyle = true
//	})
//
// The store must support conditional writes (If-None-Match and If-Match on
// PutObject) and apply them atomically. Amazon S3 does for general purpose
// buckets. A store that ignores the headers would let every writer win:
// run racedecidertest.Run against it before relying on it.
//
// # Errors
//
// One function, classify, maps every S3 answer to the classes of the
// RaceDecider contract: 412 and 409 ConditionalRequestConflict are
// entry.ErrRaceLost; 503 SlowDown, 429 and 409 OperationAborted
// entry.ErrThrottled; 403, 404 NoSuchBucket, any other 404 and other 4xx,
// 405 and 501 entry.ErrRefused, naming the endpoint; timeouts, resets, other
// 5xx and 400 ExpiredToken (signed as refreshing credentials ran out) an
// unknown outcome, but for an ExpiredToken to a client whose credentials are
// never renewed (static ones, or cached ones that cannot expire), which is a
// refusal: the token stays expired. A read's 404 is a missing record only with
// the error code NoSuchKey, which S3 sends in the body of a GET's error
// answer (ReadCurrent uses GET, not HEAD, whose answers have no body): a 404
// without it comes from a wrong endpoint, or from a store reached with the
// bucket in the host name that serves buckets by path; the error then
// suggests path-style addressing.
//
// # Permissions
//
// The client needs s3:GetObject and s3:PutObject on the object. On AWS, also
// grant s3:ListBucket on the bucket: without it S3 answers a read of an
// object that does not exist yet with 403 Access Denied instead of 404, and
// ReadCurrent reports that error instead of an empty election.
//
// # Versions and write ids
//
// The ETag of an object written by PutObject is the MD5 of its body (unless
// it is encrypted with SSE-KMS or SSE-C). Two identical bodies would get the
// same ETag, so a writer still holding the ETag of an older record could
// overwrite a newer one that happened to be byte-for-byte the same. Every
// record carries a random write id, which makes every body, and so every
// ETag, unique; WriteEntry refuses a record without one.
//
// # Retries and unknown outcomes
//
// The AWS SDK retries a request that failed in transit (connection reset,
// timeout) or with a 5xx status. For a conditional write that is safe: if
// the first attempt was applied, the retry is refused by its own condition
// and cannot overwrite anything. WriteEntry counts the attempts and, when a
// retried write was refused, returns an error that does not wrap
// entry.ErrRaceLost: the outcome is unknown, and the engine resolves it by
// reading the record back and looking for its write id. Every other error
// (timeout, reset with no retries left, cancelled context) is such an
// unknown outcome too.
//
// Each ReadCurrent and WriteEntry call, SDK retries included, is bounded by
// DefaultTimeout unless WithTimeout says otherwise, so a connection that
// hangs without an error does not stall a candidate.
//
// # Clocks
//
// The token's CommitTime is the object's Last-Modified time (from a read) or
// the response's Date header (from a write): the store's clock, to whole
// seconds.
//
// There is no push notification: this Decider does not implement
// leaderelection.ChangeNotifier, so waiting candidates and watchers poll
// (see Config.PollInterval and WatchConfig.PollInterval).
package s3

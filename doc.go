// Package leaderelection elects one leader among many processes using only a
// conditional write to storage the processes already have: a Google Cloud
// Storage object (package gcs), an Amazon S3 object (package s3), a file
// (package file), or memory for tests (package memory); and, as modules of
// their own so that their SDKs weigh only on their users, an Azure blob
// (azblob), a DynamoDB item (dynamodb), a PostgreSQL row (postgres) or a
// Kubernetes Lease (kube).
//
// # How it works
//
// One record per election holds the leader's id, its term's expiry and a
// fencing token. Candidates ([Config.Acquire]) race to replace the record with
// a write conditioned on the version they read; the store lets exactly one of
// them win. The winner's [Config.OnElected] runs with a context that ends with
// its leadership and a [TimeView] of its term's expiry. The leader extends its
// term twice per term. Observers follow the election with [WatchConfig.Watch].
//
// # Safety model
//
// Leadership is a lease: it rests on clocks, not only on the store.
//
//   - Clocks: any two participants' clocks are assumed to differ by at most
//     [Config.MaxClockSkew] and to run at nearly the same rate. A leader acts
//     only while its own clock reads before TermExpiry; any other candidate
//     writes only once its own clock reads after TermExpiry + MaxClockSkew,
//     which on the leader's clock is no earlier than TermExpiry. The
//     conditional write serialises all writers. So while the assumption
//     holds, no two candidates ever both see a valid TimeView.
//   - Check the TimeView, not only the context: the elected context is
//     cancelled by a goroutine and may be observed late when the CPU is
//     busy. [TimeView.ValueInFuture] is exact. Call it right before every
//     action that needs leadership.
//   - Pauses need fencing: a process can check its TimeView, then stop (GC,
//     swap, a paused VM) past its expiry, then act. No lease can prevent
//     that. Pass the fencing token ([TimeView.Term], the record's Term) to
//     every downstream system the leader writes to, and have it reject any
//     write carrying a smaller token than the largest it has seen. Tokens go
//     up with every new tenure and stay the same across extensions.
//   - Release: when Acquire's context ends while leading, the elected
//     context is cancelled, OnElected is waited for, the TimeView is set
//     into the past, and only then is the record marked Released, so a
//     successor may take over at once without any clock assumption. What
//     acts for the leader is waited for too (a legrpc Guard's admitted
//     calls); if it outlasts the term, no release is written.
//   - Two clocks: the TimeView is valid only while both the wall clock
//     (against the stored expiry) and the monotonic clock (against the
//     winning write's send time + TermLength) say so, as a suspended host
//     sees one jump and not the other.
//   - Store errors: a backend reports a lost race ([ErrRaceLost]), a
//     throttled request ([ErrThrottled], retried with backoff), a refusal
//     that will not heal ([ErrRefused]: permission denied, a missing bucket
//     or table; Acquire and Watch end with it, naming the store), or an
//     unknown outcome (anything else). Every retry backs off, capped and
//     jittered.
//   - OnElected returning ends the tenure; the candidate pauses at least a
//     TermLength (doubling, to 8 to 16 x) before campaigning again, so an OnElected
//     that returns at once costs no more writes than a held term.
//   - Deletion of the record: a candidate that saw it treats it as held for
//     TermLength + MaxClockSkew after noticing, and numbers its tenure above
//     every Term it saw; a created record is numbered from the clock in
//     Unix microseconds, so Terms keep rising even for a process that never
//     saw the deleted record (which, though, does not wait for its term:
//     only fencing protects against its holder then).
//   - Unknown outcomes: a write that fails in a way that may have been
//     applied (a timeout, a reset connection, a retried request reported as
//     a lost race) is resolved by reading back its random write id. A
//     candidate never steps down because of its own write, and never
//     mistakes another process (even one with the same LeaderID) for itself.
//   - What it does not guarantee: liveness while the store is unreachable,
//     or safety when clocks drift apart by more than MaxClockSkew.
//
// # Sizing
//
// A crashed leader is replaced within TermLength + MaxClockSkew of its last
// extension, on the successor's clock (up to TermLength + 2 x MaxClockSkew of
// real time when that clock is behind the leader's). The
// leader writes twice per term, earlier when its writes are slow: it keeps its
// term without a gap while writes succeed within TermLength/2. TermLength must exceed 2 x MaxClockSkew;
// use 4 x or more. [DefaultTermLength] and [DefaultMaxClockSkew] (15 s and
// 1 s) suit hosts synchronised by NTP or a cloud time service.
//
// # Backends
//
// A backend implements [RaceDecider]: read the record, and write it
// conditioned on the version read. Backends that can push changes also
// implement [ChangeNotifier]; the others are polled. Package racedecidertest
// is the conformance suite every backend runs.
//
// [OpenDecider] opens a backend from a URL (mem://NAME, file:///PATH,
// gs://BUCKET/OBJECT, s3://BUCKET/KEY?region=R); import the backend's package,
// a blank import is enough, to register its scheme.
package leaderelection

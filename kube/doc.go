// Package kube runs leader elections on a Kubernetes Lease
// (coordination.k8s.io/v1), through k8s.io/client-go. It is a module of its
// own, so that users of the other backends never see client-go and its
// dependencies.
//
// # Storage
//
// One Lease per election. The record lives in the annotation
// RecordAnnotation (the text entry.Marshal writes); the Lease's spec says
// the same in the form kubectl and client-go read: holderIdentity is the
// leader's id (empty once released), renewTime + leaseDurationSeconds is
// the term's expiry, acquireTime is when the tenure began, leaseTransitions
// counts changes of holder. The Lease's resourceVersion is the token: the
// first write is a create, every other one an update conditioned on the
// resourceVersion read (409 Conflict or AlreadyExists is a lost race). The
// API server gives no commit time precise enough to use, so
// LeaderToken.CommitTime is zero.
//
// # Push
//
// Decider implements leaderelection.ChangeNotifier with one watch on the
// Lease (a field selector on its name), re-listing after 410 Gone and
// re-opening with capped, jittered backoff. Each watch has a deadline of its
// own (the server's timeout plus a margin) and is replaced after 150 s
// without an event or a bookmark, so that a connection that died silently
// cannot leave it deaf for long. While it is down, WaitForChange fails at
// once and the engine polls; between one watch and its replacement a wait
// vouches for nothing, and fails once that takes over 2 s.
//
// # Safety and migration from client-go
//
// The safety model is the engine's (see the leaderelection package): a
// leader acts only while its TimeView is valid, candidates wait for the
// expiry plus MaxClockSkew, and Term is the fencing token that closes the
// gap a paused process leaves.
//
// A Lease last written by a client-go elector (k8s.io/client-go/tools/
// leaderelection with a LeaseLock) counts as held by its holderIdentity
// until renewTime + leaseDurationSeconds + MaxClockSkew, and a leader of
// this package writes a spec that client-go electors judge valid for at
// least as long as its term (its leaseDurationSeconds is counted on the
// host's clock: with a leaderelection.Config.Clock that reads behind the
// host's, shorter by as much). So both can run on one Lease during a rolling
// migration without two leaders, provided the client-go electors run with
// ReleaseOnCancel false and keep LeaseDuration > S + RetryPeriod +
// RenewDeadline, where S (at most RenewDeadline) is how long a successful
// renewal request takes: a client-go leader may go on believing it leads
// that long after the renewTime it last wrote. LeaseDuration >=
// 2*RenewDeadline + RetryPeriod holds whatever the latency. (With
// ReleaseOnCancel, a client-go leader whose renewals failed tries to release
// before it stops, and one that was cut off may release the Lease over its
// successor, which client-go candidates take at once: see the README.)
//
// A Lease whose holderIdentity is set without renewTime or
// leaseDurationSeconds (made by hand, or by a tool that is not client-go)
// says no end to its holder's lease: reading it fails with an error
// wrapping entry.ErrCorruptRecord, and Acquire ends, never taking it over.
// Clear holderIdentity or delete the Lease to hand it to the election.
//
// # Permissions
//
// The identity needs get, list, watch, create and update on leases in the
// election's namespace (a Role and RoleBinding; see the README).
package kube

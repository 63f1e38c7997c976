package legrpc

// DefaultServiceConfig is a gRPC service config for the clients of a
// leader-elected service. Publish it from the leader, in
// leaderelection.Config.ConnectionParams, and the legrpc resolver hands it to
// every client; a client may also pass it to grpc.WithDefaultServiceConfig,
// for leaders that publish none.
//
// It makes a change of leader invisible to callers that give their calls a
// deadline of a few seconds:
//
//   - pick_first: every call goes to the one leader.
//   - waitForReady: while the election has no leader (between a release and
//     the next election, or until an expired term can be taken over), calls
//     wait for one instead of failing at once. A call can opt out with
//     grpc.WaitForReady(false); it then fails with ErrNoLeader's text once
//     its retries are spent, about 1.5 s later.
//   - retryPolicy on UNAVAILABLE: a call that reaches a former leader, which
//     its Guard rejects, or a connection that closes as the leader shuts
//     down, is retried up to 4 more times, 0.1 s, 0.2 s, 0.4 s and 0.8 s
//     apart (±20 %), by which time the resolver has moved on to the new
//     leader.
//
// Retrying is safe for a call a Guard rejects on arrival, which never reached
// a handler. But the Guard gives the same rejection to a call whose handler
// ran and returned an error after the leadership ended under it (so that a
// graceful hand-over fails no calls), and a call that fails with UNAVAILABLE
// for another reason may also have been partly served: so the methods of a
// service using this config should be idempotent, or be given their own
// method config without retries.
const DefaultServiceConfig = `{
  "loadBalancingConfig": [{"pick_first": {}}],
  "methodConfig": [{
    "name": [{}],
    "waitForReady": true,
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

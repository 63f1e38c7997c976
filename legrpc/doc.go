// Package legrpc routes gRPC clients to the leader of an election, and keeps
// the servers that do not lead from serving.
//
// # Clients
//
// A client dials "leaderelection:///<name>" with a [Builder]:
//
//	b := legrpc.NewBuilder(leaderelection.WatchConfig{Decider: d, MaxClockSkew: time.Second})
//	conn, err := grpc.NewClient("leaderelection:///scheduler",
//		grpc.WithResolvers(b),
//		grpc.WithDefaultServiceConfig(legrpc.DefaultServiceConfig),
//		grpc.WithTransportCredentials(creds))
//
// The resolver follows the election with [leaderelection.WatchConfig.Watch]
// and hands gRPC the current leader's HostPort addresses, with the service
// config the leader publishes in ConnectionParams. While the election has no
// valid leader (nobody elected yet, the last leader released, or its term
// expired) it hands gRPC no address and an error wrapping [ErrNoLeader]:
// calls that wait for ready wait, the others fail with codes.Unavailable.
// While reads of the record fail (a record turned corrupt, a store that
// times out), that error carries the cause of a recent one, told again when
// the kind of failure changes.
// At a term's expiry the resolver reads the record before it drops the
// leader, so that one that extended on time keeps its clients' connections.
//
// How fast a client learns of a new leader is the Decider's business: at
// once with a store that pushes changes (package memory), within the
// WatchConfig's PollInterval otherwise. When a connection to the leader
// fails, gRPC asks the resolver to resolve again, and the resolver then
// reads the record at once instead of waiting for the next poll.
//
// # Servers
//
// Each server process runs a candidate ([leaderelection.Config.Acquire]) with
// a [Guard] attached, and installs the Guard's interceptors. A call that
// arrives while its server does not lead is rejected with codes.Unavailable,
// naming the leader the server last saw ([NotLeaderFromError]). The leader
// publishes [DefaultServiceConfig], whose retry policy retries such calls,
// and whose waitForReady makes calls wait while there is no leader; together
// they make a graceful change of leader invisible to callers.
//
// # What the Guard does not guarantee
//
// The Guard checks leadership when a call arrives. Leadership can end while
// a handler runs, and a process can pause (garbage collection, a stopped
// VM) between a check and the action it allows. So a handler checks again,
// with [TimeViewFromContext], right before each action that needs leadership,
// and passes the TimeView's Term to the systems it writes to, which reject
// writes carrying a smaller Term than the largest they have seen. See the
// safety model of package leaderelection.
//
// Routing is advisory: during a change of leader a client may still call the
// former leader, which rejects the call, or a server may name a leader that
// has just stepped down. Correctness never rests on routing, only on the
// Guard, the handler's checks and fencing.
package legrpc

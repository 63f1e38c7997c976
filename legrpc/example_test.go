package legrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/memory"
)

// leaderHealth is the service the example's leader provides: the standard
// health service, answering only while its process leads.
type leaderHealth struct {
	healthpb.UnimplementedHealthServer
	id string
}

func (h leaderHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	// The Guard checked leadership when the call arrived; check again right
	// before acting, and pass tv.Term() to anything written on the way.
	if tv, ok := legrpc.TimeViewFromContext(ctx); !ok || !tv.ValueInFuture() {
		return nil, status.Error(codes.Unavailable, "no longer the leader")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("served-by", h.id))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// exampleServer is one process of the service: a gRPC server and the
// candidate that makes it the leader.
type exampleServer struct {
	srv      *grpc.Server
	elected  chan struct{} // closed when first elected
	stepDown func()        // ends the candidacy, releasing the leadership
	done     chan struct{} // closed when Acquire has returned
}

func startExampleServer(store leaderelection.RaceDecider, id string) *exampleServer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	var guard legrpc.Guard
	s := &exampleServer{
		srv: grpc.NewServer(
			grpc.UnaryInterceptor(guard.UnaryServerInterceptor()),
			grpc.StreamInterceptor(guard.StreamServerInterceptor())),
		elected: make(chan struct{}),
		done:    make(chan struct{}),
	}
	healthpb.RegisterHealthServer(s.srv, leaderHealth{id: id})
	go func() { _ = s.srv.Serve(lis) }()

	cfg := guard.Attach(leaderelection.Config{
		Decider:  store,
		LeaderID: id,
		// Where clients reach this process while it leads, and how.
		HostPort:         []string{lis.Addr().String()},
		ConnectionParams: []byte(legrpc.DefaultServiceConfig),
		TermLength:       2 * time.Second,
		MaxClockSkew:     100 * time.Millisecond,
		OnElected: func(ctx context.Context, _ *leaderelection.TimeView) {
			select {
			case <-s.elected:
			default:
				close(s.elected)
			}
			<-ctx.Done()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.stepDown = func() {
		cancel()
		<-s.done // Acquire has released the leadership
	}
	go func() {
		defer close(s.done)
		_ = cfg.Acquire(ctx) // context.Canceled, once stepped down
	}()
	return s
}

func (s *exampleServer) stop() {
	s.stepDown()
	s.srv.Stop()
}

// Example runs a leader-elected service of two processes and a client that
// follows the leadership from one to the other.
func Example() {
	store := memory.NewDecider()
	a := startExampleServer(store, "a")
	defer a.stop()
	<-a.elected
	b := startExampleServer(store, "b")
	defer b.stop()

	conn, err := grpc.NewClient("leaderelection:///example",
		grpc.WithResolvers(legrpc.NewBuilder(leaderelection.WatchConfig{Decider: store, MaxClockSkew: 100 * time.Millisecond})),
		grpc.WithDefaultServiceConfig(legrpc.DefaultServiceConfig),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	check := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var hdr metadata.MD
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
		if err != nil {
			fmt.Println("call failed:", err)
			return
		}
		fmt.Println(resp.GetStatus(), "from", hdr.Get("served-by"))
	}

	check()
	a.stepDown() // a releases; b takes over; the client follows
	check()
	// Output:
	// SERVING from [a]
	// SERVING from [b]
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/racedecider/leaderelection/internal/demo"
)

// demoMain is "leaderelect demo": the demo of internal/demo (which "go run
// ./cmd/demo" also runs), with leaderelect's flag and exit conventions.
func demoMain(args []string, stdout, stderr io.Writer) outcome {
	fs := newFlagSet("demo", demo.Synopsis, demo.Description, stdout, stderr)
	var o demo.Options
	o.Bind(fs.FlagSet)
	if out, ok := fs.parse(args); !ok {
		return out
	}
	problems := o.Check(fs.FlagSet)
	if fs.NArg() > 0 {
		problems = append(problems, strayArgs(fs.Args()))
	}
	if len(problems) > 0 {
		return fs.usageError("%s", joinLines(problems))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var got atomic.Value
	go func() {
		select {
		case s := <-sigs:
			got.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	ok, err := demo.Run(ctx, stdout, o)
	switch {
	case got.Load() != nil:
		fmt.Fprintln(stderr, "leaderelect demo: interrupted")
		sig, _ := got.Load().(syscall.Signal)
		return outcome{signal: sig}
	case err != nil:
		return fs.failed("%v", err)
	case !ok:
		return outcome{code: exitViolation}
	}
	return outcome{}
}

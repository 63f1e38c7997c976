// Command demo shows a leader election happening: candidates campaign on an
// in-memory store inside this process, one leader pauses past its term (and
// is fenced off when it wakes), one crashes, one hands over cleanly. It is
// the first thing to run in a fresh checkout:
//
//	go run ./cmd/demo
//	go run ./cmd/demo --term 300ms
//
// It builds from the library module alone, without the cloud SDKs the
// leaderelect command links in; "leaderelect demo" runs the same demo.
//
// Exit status: 0 when the run passed its safety check, 1 when it did not, 2
// for a bad flag, 125 when the election did not move as the story needs,
// 130 or 143 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/racedecider/leaderelection/internal/demo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o demo.Options
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: go run ./cmd/demo %s\n%s\nFlags:\n", demo.Synopsis, demo.Description)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "demo: %v\nRun 'go run ./cmd/demo --help' for usage.\n", err)
		return 2
	}
	problems := o.Check(fs)
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "demo: %s\n", strings.Join(problems, "\n  "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := demo.Run(ctx, stdout, o)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "demo: interrupted")
		return 130
	case err != nil:
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 125
	case !ok:
		return 1
	}
	return 0
}

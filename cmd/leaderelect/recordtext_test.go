package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
)

// forged is a leader id chosen to forge status's and watch's output: it
// sets the terminal's title, clears the screen, and adds a line of its own.
const forged = "worker-a\x1b]0;owned\x07\x1b[2J\r\nstate         released: no leader"

// hasControl reports a control character other than a newline in s.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return (r < 0x20 && r != '\n') || r == 0x7f })
}

// TestRecordText: plain ids as they are, others quoted.
func TestRecordText(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"worker-a", "worker-a"},
		{"host-4242-ABCDEF", "host-4242-ABCDEF"},
		{"ünïcödé-ok", "ünïcödé-ok"},
		{forged, strconv.Quote(forged)},
		{"a b", `"a b"`},
		{"", `""`},
		{"rtl\u202eevil", `"rtl\u202eevil"`},
		{`back\slash`, `"back\\slash"`},
	} {
		if got := recordText(c.id); got != c.want {
			t.Errorf("recordText(%q) = %s, want %s", c.id, got, c.want)
		}
	}

}

// TestStatusAndWatchQuoteRecordText: status and watch print the leader id
// and host:port of the record quoted when they hold control characters (or
// are otherwise not plain), and as they are when plain. They used to print
// them raw: whoever could write the record could forge output, or send the
// terminal escape sequences.
func TestStatusAndWatchQuoteRecordText(t *testing.T) {
	// watch
	now := time.Now()
	ch := leaderelection.Change{Kind: leaderelection.LeaderElected}
	ch.Entry.LeaderID, ch.Entry.Term, ch.Entry.TermExpiry = forged, 3, now.Add(time.Second)
	if l := changeLine(now, ch); hasControl(l) || strings.Contains(l, "\n") || !strings.Contains(l, "leader "+strconv.Quote(forged)+"  until") {
		t.Errorf("watch prints %q for leader id %q; want it quoted", l, forged)
	}
	ch.Entry.LeaderID = "worker-a"
	if l := changeLine(now, ch); !strings.Contains(l, "  leader worker-a  until") {
		t.Errorf("watch prints %q for leader id worker-a; want it as it is", l)
	}

	// status
	path := filepath.Join(t.TempDir(), "rec")
	d, err := file.NewDecider(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	elected := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- leaderelection.Config{
			Decider: d, LeaderID: forged, HostPort: []string{"10.0.0.1:80\x1b[8m"}, TermLength: 4 * time.Second, MaxClockSkew: 500 * time.Millisecond,
			OnElected: func(ctx context.Context, _ *leaderelection.TimeView) {
				close(elected)
				<-ctx.Done()
			},
		}.Acquire(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-elected:
	case <-time.After(patience):
		t.Fatal("not elected")
	}
	var stdout, stderr bytes.Buffer
	if o := dispatch([]string{"status", "--store", "file://" + path}, &stdout, &stderr); o.code != 0 {
		t.Fatalf("status: %+v\n%s", o, &stderr)
	}
	out := stdout.String()
	var states, leaders int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "  ")
		switch k {
		case "state":
			states++
		case "leader":
			if strings.TrimSpace(v) == strconv.Quote(forged) {
				leaders++
			}
		}
	}
	if hasControl(out) || states != 1 || leaders != 1 || !strings.Contains(out, `"10.0.0.1:80\x1b[8m"`) {
		t.Errorf("status, leader id %q and host:port %q: printed\n%s\nwant both quoted", forged, "10.0.0.1:80\x1b[8m", out)
	}
}

package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
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
	out := statusWhileLeading(t, forged, []string{"10.0.0.1:80\x1b[8m"})
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

package racedecidertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

const (
	// commitSlop bounds how far a store's commit time may be from this
	// machine's clock when it is taken. Stores read their own clocks,
	// which NTP keeps well within a second of ours, but a test server in
	// a container or a VM may drift further; a minute still catches a
	// wrong unit, a wrong epoch or a time zone applied twice.
	commitSlop = time.Minute
	// commitOrderSlop is how far a commit time may fall before one
	// reported earlier for the same record. HTTP dates (S3, Azure,
	// DynamoDB) have whole seconds: a Last-Modified read back is
	// truncated below the Date of the write's reply, and front ends whose
	// clocks differ by milliseconds can round to seconds a second apart.
	commitOrderSlop = 2 * time.Second
)

// commitTimes checks LeaderToken.CommitTime across successive writes of one
// record, each read back: where a backend reports it, it is near this
// machine's clock and does not go back from one write to the next. A
// backend may report none (entry.LeaderToken allows a zero CommitTime: the
// Kubernetes API server gives none precise enough), or report it on writes
// only (a read that would need a second request for it), but it reports it
// on every write or on none, and on every read or on none: a backend that
// drops it on some, say on a replace but not on a create, is broken in one
// of its paths.
func commitTimes(t *testing.T, d leaderelection.RaceDecider) {
	var (
		tok    entry.LeaderToken
		latest time.Time // the latest commit time reported so far
		lastAt string    // and what reported it
		set    = map[string][]string{}
		unset  = map[string][]string{}
	)
	check := func(kind, what string, commit, before, after time.Time) {
		if commit.IsZero() {
			unset[kind] = append(unset[kind], what)
			return
		}
		set[kind] = append(set[kind], what)
		if commit.Before(before.Add(-commitSlop)) || commit.After(after.Add(commitSlop)) {
			t.Errorf("%s: CommitTime %v is more than %v from this machine's clock (%v): a wrong unit, epoch or time zone?",
				what, commit, commitSlop, after.Round(0))
		}
		if !latest.IsZero() && commit.Before(latest.Add(-commitOrderSlop)) {
			t.Errorf("%s: CommitTime %v is %v before that of %s (%v): commit times of one record must not go back",
				what, commit, latest.Sub(commit), lastAt, latest)
		}
		if commit.After(latest) {
			latest, lastAt = commit, what
		}
	}
	for n := int64(0); n < 4; n++ {
		before := time.Now()
		tok = write(t, d, sampleEntry(n, fmt.Sprintf("w-%d", n)), tok)
		check("write", fmt.Sprintf("write %d", n), tok.CommitTime, before, time.Now())
		before = time.Now()
		got := read(t, d)
		check("read", fmt.Sprintf("read after write %d", n), got.Token.CommitTime, before, time.Now())
	}
	for _, kind := range []string{"write", "read"} {
		if len(set[kind]) > 0 && len(unset[kind]) > 0 {
			t.Errorf("CommitTime is set on %s but zero on %s: a backend reports it on every %s or on none",
				strings.Join(set[kind], ", "), strings.Join(unset[kind], ", "), kind)
		}
	}
	if len(set["write"])+len(set["read"]) == 0 {
		t.Log("the backend reports no commit times (allowed): the engine cannot compare its clock with the store's")
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
)

// status estimates the leader's clock against the store's from the record:
// the expiry it asked for, less the term, against the commit time. Here the
// leader's clock runs 3 s ahead of this host's, whose clock the file
// store's commit times come from.
func TestStatusEstimatesLeaderClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d, err := file.NewDecider(path)
	if err != nil {
		t.Fatal(err)
	}
	const term, ahead = 10 * time.Second, 3 * time.Second
	for _, released := range []bool{false, true} {
		cur, err := d.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		e := &entry.RaceEntry{ElectionNumber: cur.ElectionNumber + 1, Term: cur.ElectionNumber + 1, LeaderID: "a",
			TermExpiry: time.Now().Add(ahead + term), Released: released, WriteID: "w", Token: cur.Token}
		if _, err := d.WriteEntry(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if o := dispatch([]string{"status", "--store", "file://" + path, "--term", term.String(), "--json"}, &stdout, &stderr); o.code != 0 {
			t.Fatalf("status: %+v\n%s", o, &stderr)
		}
		var j recordJSON
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		if released {
			if j.LeaderClockOffsetSeconds != nil {
				t.Errorf("a release gives no estimate, got %v", *j.LeaderClockOffsetSeconds)
			}
			continue
		}
		// The store committed the write just after the leader sent it,
		// by this host's clock: the store's clock less the leader's is
		// about -3 s, a little more for the time the write took.
		if j.LeaderClockOffsetSeconds == nil || *j.LeaderClockOffsetSeconds < -3 || *j.LeaderClockOffsetSeconds > -2.5 {
			t.Errorf("leaderClockOffsetSeconds %v, want about -3", j.LeaderClockOffsetSeconds)
		}
		stdout.Reset()
		if o := dispatch([]string{"status", "--store", "file://" + path, "--term", term.String(), "--skew", "4s"}, &stdout, &stderr); o.code != 0 {
			t.Fatalf("status: %+v\n%s", o, &stderr)
		}
		if got := stdout.String(); !strings.Contains(got, "s ahead of the store's (from its last write, if its term is --term 10s); more than half of --skew") {
			t.Errorf("status lacks the leader's clock line:\n%s", got)
		} else if !regexp.MustCompile(`its write asked for a term of 1(3\.00|2\.9\d)s\)`).MatchString(got) {
			t.Errorf("status does not say the term the write asked for (13 s by the store's clock):\n%s", got)
		}
	}
	var stdout, stderr bytes.Buffer
	if o := dispatch([]string{"status", "--store", "file://" + path, "--term", "0s"}, &stdout, &stderr); o.code != exitUsage || !strings.Contains(stderr.String(), "--term (0s) must be positive") {
		t.Errorf("--term 0s: %+v, stderr %q", o, &stderr)
	}
}

// status counts the tenure's writes from the record's numbers: the
// election number rises by one per write from the tenure's first (the term).
func TestStatusCountsTheTenuresWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d, err := file.NewDecider(path)
	if err != nil {
		t.Fatal(err)
	}
	const first = 1795764704372537 // numbered from a clock, as the engine does
	for i, released := range []bool{false, false, true} {
		cur, err := d.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		e := &entry.RaceEntry{ElectionNumber: first + int64(i), Term: first, LeaderID: "a",
			TermExpiry: time.Now().Add(time.Minute), Released: released, WriteID: "w", Token: cur.Token}
		if _, err := d.WriteEntry(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if o := dispatch([]string{"status", "--store", "file://" + path}, &stdout, &stderr); o.code != 0 {
			t.Fatalf("status: %+v\n%s", o, &stderr)
		}
		want := fmt.Sprintf("%d (write %d of this tenure)", first+int64(i), i+1)
		if got := stdout.String(); !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}

package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
)

// durationText, relative and offsetText are total: a duration at either end
// of time.Duration's range, as time.Time.Sub saturates to for instants more
// than 292 years apart, is "over 292 years", where -math.MinInt64 (itself)
// once sent durationText into endless recursion.
func TestDurationTextFarOff(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{durationText(math.MinInt64), "-over 292 years"},
		{durationText(math.MaxInt64), "over 292 years"},
		{durationText(math.MinInt64 + 1), "-over 292 years"},
		{durationText(-90 * time.Second), "-1m30s"},
		{relative(math.MinInt64), "over 292 years ago"},
		{relative(math.MaxInt64), "in over 292 years"},
		{relative(-1500 * time.Millisecond), "1.50s ago"},
		{offsetText(math.MinInt64, time.Second, 15*time.Second), "about over 292 years ahead of the store's"},
		{offsetText(math.MaxInt64, time.Second, 15*time.Second), "about over 292 years behind the store's"},
	} {
		if !strings.HasPrefix(c.got, c.want) {
			t.Errorf("got %q, want it to begin %q", c.got, c.want)
		}
	}
	if got := offsetText(math.MinInt64, time.Second, 15*time.Second); !strings.Contains(got, "asked for a term of over 292 years") {
		t.Errorf("offsetText(MinInt64) = %q, want the term asked for saturated", got)
	}
}

// status shows a valid record whose expiry is more than 292 years away (a
// zero expiry, year 1; or year 9999) without crashing.
func TestStatusFarOffExpiry(t *testing.T) {
	for _, expiry := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
		path := filepath.Join(t.TempDir(), "record")
		d, err := file.NewDecider(path)
		if err != nil {
			t.Fatal(err)
		}
		e := &entry.RaceEntry{ElectionNumber: 5, Term: 5, LeaderID: "old", WriteID: "w", TermExpiry: expiry}
		if _, err := d.WriteEntry(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if o := dispatch([]string{"status", "--store", "file://" + path}, &stdout, &stderr); o.code != 0 {
			t.Fatalf("status of a record expiring %v: %+v\n%s", expiry, o, &stderr)
		}
		if !strings.Contains(stdout.String(), "over 292 years") {
			t.Errorf("status of a record expiring %v:\n%s", expiry, &stdout)
		}
	}
}

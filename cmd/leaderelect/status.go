package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/redact"
)

const statusDescription = `
Reads the election record once and shows it: who leads, the fencing token,
when the term ends. The state is judged on this machine's clock:

  leading   a leader holds a term that has not ended
  expired   the term ended without an extension; another candidate may take
            over once --skew more has passed
  released  the last leader stepped down; anyone may take over at once
  none      no election has happened at this store yet

It also estimates the leader's clock against the store's, from the leader's
last write: the record holds the expiry the leader asked for (its clock when
it sent the write, plus --term) and the store's commit time. The estimate is
good to within that write's round trip and the store's time precision (a
second on S3 and Azure, a millisecond on GCS); --term must be the
candidates' term for it to mean anything. This host's own offset needs a
write, which status does not make: see the candidates' metrics
(leaderelection_clock_offset_seconds) for every host's.

A leader id or host:port that is not plain text (control characters,
spaces, quotes, or empty) is printed quoted, as Go quotes strings.
`

const watchDescription = `
Prints one line per change of the election record, until interrupted:

  elected   a new leader began a term (with a new, larger fencing token)
  extended  the leader extended its term
  released  the leader stepped down
  expired   the term ended without an extension (on this machine's clock)
  deleted   the record was deleted

The first line describes the record found at start. Stores that cannot push
changes (all but mem://, postgres:// and k8s://) are read every --poll, and
also when a term ends; the others push each change, and are read every
--poll while their push channel fails. SIGINT or SIGTERM ends it, with
status 0; SIGINT stays ignored when watch starts with it ignored (nohup, a
background job of a script). A leader id that is not plain text
(control characters, spaces, quotes, or empty) is printed quoted, as Go
quotes strings.
`

// recordJSON is the --json form of a record, in status and watch.
type recordJSON struct {
	Time           *time.Time `json:"time,omitempty"`   // watch: when the change was seen
	Change         string     `json:"change,omitempty"` // watch: elected, extended, released, expired, deleted
	Store          string     `json:"store,omitempty"`  // status
	State          string     `json:"state,omitempty"`  // status: leading, expired, released, none
	LeaderID       string     `json:"leaderID,omitempty"`
	Term           *int64     `json:"term,omitempty"`
	ElectionNumber *int64     `json:"electionNumber,omitempty"`
	TermExpiry     *time.Time `json:"termExpiry,omitempty"`
	// ExpiresInSeconds is TermExpiry less this machine's clock; negative
	// once it has passed.
	ExpiresInSeconds *float64 `json:"expiresInSeconds,omitempty"`
	Released         bool     `json:"released"`
	HostPort         []string `json:"hostPort,omitempty"`
	WriteID          string   `json:"writeID,omitempty"`
	// Version is the store's version of the record (its token).
	Version string `json:"version,omitempty"`
	// LeaderClockOffsetSeconds (status) estimates the store's clock less
	// the leader's, from the leader's last write (see leaderOffset).
	LeaderClockOffsetSeconds *float64 `json:"leaderClockOffsetSeconds,omitempty"`
}

func toJSON(rec *entry.RaceEntry, now time.Time) recordJSON {
	if rec.ElectionNumber == entry.NoElections {
		return recordJSON{}
	}
	expiry := rec.TermExpiry
	in := expiry.Sub(now).Seconds()
	return recordJSON{
		LeaderID:         rec.LeaderID,
		Term:             &rec.Term,
		ElectionNumber:   &rec.ElectionNumber,
		TermExpiry:       &expiry,
		ExpiresInSeconds: &in,
		Released:         rec.Released,
		HostPort:         rec.HostPort,
		WriteID:          rec.WriteID,
		Version:          rec.Token.Version,
	}
}

// leaderOffset estimates the store's clock less the leader's when it wrote
// rec: the leader asked for an expiry of its clock at sending plus term, and
// the store committed the write at CommitTime, after the sending and before
// the answer. The estimate is therefore at least the true offset less the
// store's time precision, and at most the true offset plus the write's
// round trip. ok is false where it cannot be made: no commit time, or a
// release (whose expiry is the release time, not a term away).
func leaderOffset(rec *entry.RaceEntry, term time.Duration) (time.Duration, bool) {
	if rec.ElectionNumber == entry.NoElections || rec.Released || rec.Token.CommitTime.IsZero() {
		return 0, false
	}
	return rec.Token.CommitTime.Sub(rec.TermExpiry.Add(-term)), true
}

// offsetText describes a store-less-leader offset for people, with a warning
// when it is more than half of skew. Such an offset may as well be a --term
// that is not the candidates': the warning says what term the write asked
// for by the store's clock (the offset less the term), which tells the two
// apart.
func offsetText(off, skew, term time.Duration) string {
	var text string
	switch {
	case off > 0:
		text = durationText(off) + " behind the store's"
	case off < 0:
		text = durationText(absDuration(off)) + " ahead of the store's"
	default:
		text = "level with the store's"
	}
	text = fmt.Sprintf("about %s (from its last write, if its term is --term %s)", text, term)
	if skew > 0 && absDuration(off) > skew/2 {
		asked := term - off
		if off < 0 && asked < term {
			asked = math.MaxInt64 // saturated, as off is
		}
		text += fmt.Sprintf("; more than half of --skew: check its time sync, or give status the candidates' --term (by the store's clock, its write asked for a term of %s)", durationText(asked))
	}
	return text
}

func state(rec *entry.RaceEntry, now time.Time) string {
	switch {
	case rec.ElectionNumber == entry.NoElections:
		return "none"
	case rec.Released:
		return "released"
	case now.Before(rec.TermExpiry):
		return "leading"
	}
	return "expired"
}

func statusMain(args []string, stdout, stderr io.Writer) outcome {
	fs := newFlagSet("status", "--store URL [--json]", statusDescription+"\nStore URLs:\n"+storeURLHelp, stdout, stderr)
	store := fs.String("store", "", "the election's store `URL`")
	asJSON := fs.Bool("json", false, "print the record as a JSON object")
	skew := fs.Duration("skew", leaderelection.DefaultMaxClockSkew, "the candidates' --skew, to say when a takeover becomes possible")
	term := fs.Duration("term", leaderelection.DefaultTermLength, "the candidates' --term, to estimate the leader's clock offset")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the store")
	if o, ok := fs.parse(args); !ok {
		return o
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, strayArgs(fs.Args()))
	}
	if *term <= 0 {
		problems = append(problems, fmt.Sprintf("--term (%s) must be positive", *term))
	}
	if *skew < 0 {
		problems = append(problems, fmt.Sprintf("--skew (%s) must not be negative", *skew))
	}
	if *timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--timeout (%s) must be positive", *timeout))
	}
	if len(problems) > 0 {
		return fs.usageError("%s", joinLines(problems))
	}
	_, rec, o, ok := openStore(fs, *store, *timeout)
	if !ok {
		return o
	}
	now := time.Now()
	if *asJSON {
		j := toJSON(rec, now)
		j.Store, j.State = redact.URL(*store), state(rec, now)
		if off, ok := leaderOffset(rec, *term); ok {
			secs := off.Seconds()
			j.LeaderClockOffsetSeconds = &secs
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(j); err != nil {
			return fs.failed("%v", err)
		}
		return outcome{}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("store", "%s", redact.URL(*store))
	st := state(rec, now)
	switch st {
	case "none":
		row("state", "none: no election has happened at this store yet")
		tw.Flush()
		return outcome{}
	case "leading":
		row("state", "leading")
	case "released":
		row("state", "released: no leader; anyone may take over at once")
	case "expired":
		if takeover := rec.TermExpiry.Add(*skew); now.Before(takeover) {
			row("state", "expired: no leader; a takeover is possible in %s", durationText(takeover.Sub(now)))
		} else {
			row("state", "expired: no leader; anyone may take over")
		}
	}
	label := "leader"
	if st != "leading" {
		label = "last leader"
	}
	row(label, "%s", recordText(rec.LeaderID))
	row("fencing token", "%d (term)", rec.Term)
	// The numbering starts from the record's creation time, so the number
	// counts nothing by itself; less the term (the tenure's first write's
	// number) it counts the tenure's writes.
	row("election", "%d (write %d of this tenure)", rec.ElectionNumber, rec.ElectionNumber-rec.Term+1)
	if !rec.Released {
		row("term expiry", "%s (%s)", rec.TermExpiry.Local().Format(time.RFC3339Nano), relative(rec.TermExpiry.Sub(now)))
	}
	if len(rec.HostPort) > 0 {
		hp := make([]string, len(rec.HostPort))
		for i, h := range rec.HostPort {
			hp[i] = recordText(h)
		}
		row("host:port", "%s", strings.Join(hp, ", "))
	}
	if !rec.Token.CommitTime.IsZero() {
		row("written", "%s (store's clock)", rec.Token.CommitTime.Local().Format(time.RFC3339Nano))
	}
	if off, ok := leaderOffset(rec, *term); ok {
		row(label+"'s clock", "%s", offsetText(off, *skew, *term))
	}
	tw.Flush()
	return outcome{}
}

func relative(d time.Duration) string {
	if d >= 0 {
		return "in " + durationText(d)
	}
	return durationText(absDuration(d)) + " ago"
}

func watchMain(args []string, stdout, stderr io.Writer) outcome {
	fs := newFlagSet("watch", "--store URL [--json]", watchDescription+"\nStore URLs:\n"+storeURLHelp, stdout, stderr)
	store := fs.String("store", "", "the election's store `URL`")
	asJSON := fs.Bool("json", false, "print each change as a JSON object on one line")
	skew := fs.Duration("skew", leaderelection.DefaultMaxClockSkew, "the candidates' --skew")
	poll := fs.Duration("poll", leaderelection.DefaultWatchPollInterval, "the longest a change may go unseen, for stores that cannot push changes")
	if o, ok := fs.parse(args); !ok {
		return o
	}
	if fs.NArg() > 0 {
		return fs.usageError("%s", strayArgs(fs.Args()))
	}
	if *skew < 0 || *poll <= 0 || *poll > maxDuration {
		return fs.usageError("--skew (%s) must not be negative and --poll (%s) must be positive, and at most %v", *skew, *poll, maxDuration)
	}
	d, _, o, ok := openStore(fs, *store, 30*time.Second)
	if !ok {
		return o
	}
	// SIGINT stays ignored if it was at start (nohup, a background job of
	// a script), as in run: an interrupt meant for others must not end
	// the watch.
	stopOn := []os.Signal{syscall.SIGTERM}
	if !signal.Ignored(os.Interrupt) {
		stopOn = append(stopOn, os.Interrupt)
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), stopOn...)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	w := leaderelection.WatchConfig{
		Decider:      d,
		MaxClockSkew: *skew,
		PollInterval: *poll,
		OnError: func(_ context.Context, err error) {
			fmt.Fprintf(stderr, "leaderelect watch: reading the record failed (retrying): %v\n", err)
		},
	}
	var werr error
	err := w.Watch(ctx, func(_ context.Context, c leaderelection.Change) {
		if werr != nil {
			return
		}
		now := time.Now()
		if *asJSON {
			j := toJSON(&c.Entry, now)
			j.Time, j.Change = &now, c.Kind.String()
			b, err := json.Marshal(j)
			if err == nil {
				_, err = fmt.Fprintf(stdout, "%s\n", b)
			}
			werr = err
		} else {
			_, werr = fmt.Fprintln(stdout, changeLine(now, c))
		}
		if werr != nil {
			cancel()
		}
	})
	if werr != nil {
		return fs.failed("writing output: %v", werr)
	}
	if sigCtx.Err() == nil {
		return fs.failed("watching the store %s: %v", redact.URL(*store), err)
	}
	return outcome{}
}

func changeLine(now time.Time, c leaderelection.Change) string {
	e := c.Entry
	line := fmt.Sprintf("%s  %-8s  term %d  leader %s", now.Local().Format("2006-01-02T15:04:05.000Z07:00"), c.Kind, e.Term, recordText(e.LeaderID))
	switch c.Kind {
	case leaderelection.LeaderElected, leaderelection.TermExtended:
		line += fmt.Sprintf("  until %s (%s)", e.TermExpiry.Local().Format("15:04:05.000"), relative(e.TermExpiry.Sub(now)))
	}
	return line
}

// recordText is a string from the record (a leader id, a host:port) as
// status and watch print it for people: as it is when it is plain, and else
// quoted as Go quotes strings. Anyone who can write the record chooses it,
// and printed raw, control characters (a terminal's escape sequences, a
// newline, a carriage return) would forge or hide output; characters that
// print nothing (a right-to-left override), spaces, quotes and backslashes
// would make it ambiguous; an empty one would leave a blank. (--json and
// run's log lines escape such characters already.)
func recordText(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '\\' || r == unicode.ReplacementChar
	}) {
		return strconv.Quote(s)
	}
	return s
}

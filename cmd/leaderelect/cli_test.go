package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/memory"
)

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	record := "file://" + filepath.Join(dir, "record")
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.WriteFile(corrupt, []byte("not a record"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout []string
		stderr []string
		// notStderr: what stderr must not say.
		notStderr []string
	}{
		{name: "no command", code: exitUsage, stderr: []string{"Commands:", "demo"}},
		{name: "unknown command", args: []string{"elect"}, code: exitUsage, stderr: []string{`unknown command "elect"`}},
		{name: "help", args: []string{"--help"}, stdout: []string{"leaderelect demo", "s3://BUCKET/KEY", "127"}},
		{name: "help run", args: []string{"help", "run"}, stdout: []string{"LEADER_TERM", "--grace duration", "[$LEADERELECT_STORE]", "(default 15s)"}},
		{name: "help help", args: []string{"help", "help"}, stdout: []string{"leaderelect run"}},
		{name: "help -h", args: []string{"--help", "-h"}, stdout: []string{"leaderelect run"}},
		{name: "run --help", args: []string{"run", "--help"}, stdout: []string{"LEADER_EXPIRY", "SIGKILL"}},
		{name: "status -h", args: []string{"status", "-h"}, stdout: []string{"released", "--json"}},
		{name: "help run grace", args: []string{"run", "--help"}, stdout: []string{"(default the smaller of 10s and a quarter of --term)"}},
		{name: "bad flag", args: []string{"watch", "--polll=1s"}, code: exitUsage,
			stderr: []string{"leaderelect watch: flag provided but not defined: --polll\n", "leaderelect watch --help"}},
		{name: "flag needs a value", args: []string{"status", "--store"}, code: exitUsage,
			stderr: []string{"leaderelect status: flag needs an argument: --store\n"}},
		{name: "duration without unit", args: []string{"run", "--term", "2", "--", "true"}, code: exitUsage,
			stderr: []string{`leaderelect run: invalid value "2" for flag --term: parse error (a duration needs a unit: 2s, 2ms or 2m)`}},
		{name: "bad duration", args: []string{"watch", "--poll=soon"}, code: exitUsage,
			stderr: []string{`leaderelect watch: invalid value "soon" for flag --poll: parse error (a duration is a number with a unit`}},
		{name: "demo duration without unit", args: []string{"demo", "--term=1"}, code: exitUsage,
			stderr: []string{`leaderelect demo: invalid value "1" for flag --term`, "needs a unit: 1s"}},
		{name: "duration without unit in the environment", args: []string{"status", "--store", record}, env: map[string]string{"LEADERELECT_SKEW": "1"},
			code: exitUsage, stderr: []string{`leaderelect status: invalid environment variable LEADERELECT_SKEW="1"`, "needs a unit: 1s"}},
		{name: "quick failover with the default grace", args: []string{"run", "--store", record + "-run", "--term=4s", "--skew=500ms", "--", "true"}},
		{name: "short term with the default grace", args: []string{"run", "--store", record + "-run", "--term=300ms", "--skew=50ms", "--", "true"}},
		{name: "run in a missing directory", args: []string{"run", "--store", "file://" + dir + "/missing/record", "--", "true"}, code: exitFailed,
			stderr: []string{"leaderelect run: ", dir + "/missing/record", "no such file or directory"}},
		{name: "run under a regular file", args: []string{"run", "--store", "file://" + corrupt + "/record", "--", "true"}, code: exitFailed,
			stderr: []string{"leaderelect run: ", corrupt + "/record", "not a directory"}},
		{name: "status under a regular file", args: []string{"status", "--store", "file://" + corrupt + "/record"}, code: exitFailed,
			stderr: []string{"leaderelect status: ", corrupt + "/record", "not a directory"}},
		{name: "watch in a missing directory", args: []string{"watch", "--store", "file://" + dir + "/missing/record"}, code: exitFailed,
			stderr: []string{"leaderelect watch: ", dir + "/missing/record", "no such file or directory"}},
		{name: "no store", args: []string{"run", "--", "true"}, code: exitUsage, stderr: []string{"--store is required", "LEADERELECT_STORE"}},
		{name: "no command to run", args: []string{"run", "--store", record}, code: exitUsage, stderr: []string{"no COMMAND given"}},
		{name: "unknown scheme", args: []string{"status", "--store", "etcd://x/y"}, code: exitUsage,
			stderr: []string{`unknown scheme "etcd"`, "file:///PATH", "gs://BUCKET/OBJECT", "mem://NAME", "s3://BUCKET/KEY"}},
		{name: "unknown parameter", args: []string{"status", "--store", "mem://x?regoin=x"}, code: exitUsage,
			stderr: []string{"unknown query parameter regoin", "mem URLs accept: none"}},
		{name: "relative file", args: []string{"status", "--store", "file:record"}, code: exitUsage, stderr: []string{"absolute path"}},
		{name: "missing directory", args: []string{"status", "--store", "file://" + dir + "/missing/record"}, code: exitFailed,
			stderr: []string{"no such file or directory"}},
		{name: "corrupt record", args: []string{"status", "--store", "file://" + corrupt}, code: exitFailed,
			stderr: []string{"corrupt election record", corrupt}},
		{name: "run on a corrupt record", args: []string{"run", "--store", "file://" + corrupt, "--", "true"}, code: exitFailed,
			stderr: []string{"corrupt election record", corrupt}},
		{name: "grace too long", args: []string{"run", "--store", record, "--term=5s", "--grace=5s", "--", "true"}, code: exitUsage,
			stderr: []string{"--grace (5s) must be less than --term (5s) minus --skew (1s)"}},
		{name: "skew too large", args: []string{"run", "--store", record, "--term=1s", "--skew=500ms", "--grace=0s", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (1s) must be greater than 2 x --skew (500ms)"}},
		{name: "skew whose double overflows", args: []string{"run", "--store", record, "--term=2s", "--skew=2562047h", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (2s) must be greater than 2 x --skew (2562047h0m0s)"}},
		{name: "watch poll too long", args: []string{"watch", "--store", record, "--poll=48h"}, code: exitUsage,
			stderr: []string{"--poll (48h0m0s) must be positive, and at most 24h"}},
		{name: "tiny term", args: []string{"run", "--store", record, "--term=500us", "--skew=0s", "--grace=0s", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (500µs) must be between 1ms and 24h"}},
		{name: "command not found", args: []string{"run", "--store", record, "--", "/no/such/command"}, code: exitNotFound,
			stderr: []string{"/no/such/command"}},
		{name: "store from the environment", args: []string{"status"}, env: map[string]string{"LEADERELECT_STORE": record},
			stdout: []string{"none: no election has happened"}},
		{name: "flag wins over environment", args: []string{"status", "--store", record}, env: map[string]string{"LEADERELECT_STORE": "bad://"},
			stdout: []string{"none"}},
		{name: "bad environment value", args: []string{"status", "--store", record}, env: map[string]string{"LEADERELECT_JSON": "maybe"},
			code: exitUsage, stderr: []string{`LEADERELECT_JSON="maybe"`, "want true or false"}},
		{name: "bad boolean flag", args: []string{"status", "--store", record, "--json=maybe"},
			code: exitUsage, stderr: []string{`invalid boolean value "maybe" for --json`, "want true or false"}},
		// --grace's default is worked out from --term: not the user's
		// to fix.
		{name: "negative term", args: []string{"run", "--store", record, "--term=-4s", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (-4s) must be positive"}, notStderr: []string{"--grace"}},
		// Acquire refuses it: a usage error, not the store's failure.
		{name: "id not UTF-8", args: []string{"run", "--store", record, "--id", "a\xffb", "--", "true"}, code: exitUsage,
			stderr: []string{`--id "a\xffb" is not valid UTF-8`}, notStderr: []string{"failed"}},
		{name: "id not UTF-8 in the environment", args: []string{"run", "--store", record, "--", "true"}, env: map[string]string{"LEADERELECT_ID": "a\xffb"},
			code: exitUsage, stderr: []string{`--id "a\xffb" is not valid UTF-8`}},
		{name: "negative grace", args: []string{"run", "--store", record, "--grace=-1s", "--", "true"}, code: exitUsage,
			stderr: []string{"--grace (-1s) must not be negative"}},
		{name: "demo candidates", args: []string{"demo", "--candidates=1"}, code: exitUsage, stderr: []string{"--candidates (1)"}},
		// A password in the store URL is shown as xxxxx (and the loop
		// below checks that no output shows it).
		{name: "password in the output", args: []string{"status", "--store", "refusing://u:s3cret@x"},
			stdout: []string{"refusing://u:xxxxx@x"}},
		{name: "password in the JSON", args: []string{"status", "--json", "--store", "refusing://u:s3cret@x"},
			stdout: []string{`"store": "refusing://u:xxxxx@x"`}},
		{name: "password in an error", args: []string{"status", "--store", "postgres://u:s3cret@127.0.0.1:1/x?table=t&election=e&password=s3cret"},
			code: exitFailed, stderr: []string{"at postgres://u:xxxxx@127.0.0.1:1/x?table=t&election=e&password=xxxxx: ", "connection refused"}},
		{name: "password in a URL that does not parse", args: []string{"status", "--store", "postgres://u:s3 cret@h/x"},
			code: exitUsage, stderr: []string{"postgres://(not shown: it does not parse)", "invalid userinfo"}},
		// A store URL given without --store is not echoed with its
		// password (nor any query value), and gets a hint.
		{name: "status with the store URL as an argument", args: []string{"status", "postgres://app:s3cret@db/app?table=t&election=e"}, code: exitUsage,
			stderr: []string{`unexpected arguments ["postgres://app:xxxxx@db/app?table=xxxxx&election=xxxxx"] (did you mean --store URL?)`}},
		{name: "watch with the store URL as an argument", args: []string{"watch", "--store", record, "x", "s3://b/k?sig=s3cret"}, code: exitUsage,
			stderr: []string{`unexpected arguments ["x" "s3://b/k?sig=xxxxx"] (did you mean --store URL?)`}},
		{name: "demo with an argument", args: []string{"demo", "app:s3cret@db"}, code: exitUsage,
			stderr: []string{`unexpected arguments ["app:(not shown: user information without //)"]`}, notStderr: []string{"--store"}},
		{name: "run with the store URL as COMMAND", args: []string{"run", "postgres://app:s3cret@db/app?table=t&election=e", "--", "true"}, code: exitUsage,
			stderr: []string{`COMMAND "postgres://app:xxxxx@db/app?table=xxxxx&election=xxxxx" looks like a store URL, and --store is required: did you mean --store URL?`}},
		{name: "run with a store and a URL as COMMAND", args: []string{"run", "--store", record, "--", "s3://b/k?X-Amz-Signature=s3cret"}, code: exitUsage,
			stderr: []string{`COMMAND "s3://b/k?X-Amz-Signature=xxxxx" looks like a store URL, and --store is given`}},
		// --store is checked before COMMAND is looked up.
		{name: "run without a store nor a command", args: []string{"run", "--", "/no/such/command"}, code: exitUsage,
			stderr: []string{"--store is required"}, notStderr: []string{"/no/such/command"}},
		// The values of parameters the scheme does not take are not
		// shown, nor a secret in a URL given as a parameter's value.
		{name: "unknown parameter with a key", args: []string{"status", "--store", "mem://x?account_key=s3cret&sas=sv%3D1%26sig%3Ds3cret"}, code: exitUsage,
			stderr: []string{`OpenDecider("mem://x?account_key=xxxxx&sas=xxxxx")`, "unknown query parameters account_key, sas"}},
		{name: "signature in an endpoint", args: []string{"status", "--store", "azblob://c/b?storage_account=acct&endpoint=https%3A%2F%2Fh%2F%3Fsv%3D1%26sig%3Ds3cret"}, code: exitUsage,
			stderr: []string{"endpoint=https%3A%2F%2Fh%2F%3Fsv%3D1%26sig%3Dxxxxx", "want an http:// or https:// URL"}},
		// A '#' is never dropped, and a NUL in a path is a bad URL, not
		// a store that fails.
		{name: "trailing hash", args: []string{"status", "--store", record + "#"}, code: exitUsage,
			stderr: []string{"a '#' with nothing after it", "%23"}},
		{name: "hash cutting a password", args: []string{"status", "--store", "postgres://app@db/app?table=t&election=e&password=ab#s3cret"}, code: exitUsage,
			stderr: []string{"a fragment (#...)", "%23"}},
		{name: "NUL in a path", args: []string{"status", "--store", record + "%00x"}, code: exitUsage,
			stderr: []string{"a NUL byte (%00)"}},
		{name: "negative status skew", args: []string{"status", "--store", record, "--skew=-1s"}, code: exitUsage,
			stderr: []string{"--skew (-1s) must not be negative"}},
		{name: "zero status timeout", args: []string{"status", "--store", record, "--timeout=0s"}, code: exitUsage,
			stderr: []string{"--timeout (0s) must be positive"}},
		{name: "negative status timeout", args: []string{"status", "--store", record, "--timeout=-1s"}, code: exitUsage,
			stderr: []string{"--timeout (-1s) must be positive"}},
		// A term in which COMMAND cannot be started is refused, where
		// run campaigned for ever.
		{name: "term too short for run", args: []string{"run", "--store", record, "--term=1ms", "--skew=0s", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (1ms) is too short for run: at least 100ms"}},
		// mem:// is no election between processes: each run leads.
		{name: "run on mem://", args: []string{"run", "--store", "mem://run-alone", "--", "true"},
			stderr: []string{"mem:// is this process's own memory: no other leaderelect shares the election"}},
		{name: "shortest term for run", args: []string{"run", "--store", record + "-run", "--term=100ms", "--skew=0s", "--", "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			o := dispatch(tc.args, &stdout, &stderr)
			if o.code != tc.code || o.signal != 0 {
				t.Errorf("exit %+v, want code %d\nstdout:\n%s\nstderr:\n%s", o, tc.code, &stdout, &stderr)
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, "cret") {
				t.Errorf("the output shows a password:\n%s", out)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
			for _, w := range tc.notStderr {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr says %q:\n%s", w, &stderr)
				}
			}
		})
	}
}

// patience is the longest any single wait in these tests may take.
const patience = 15 * time.Second

// refusingScheme is a store whose reads succeed and whose writes are refused
// for good, as a store that the process may read but not write answers.
const refusingScheme = "refusing"

func init() {
	leaderelection.RegisterScheme(refusingScheme, leaderelection.URLOpener{
		Form: "refusing://NAME",
		Open: func(ctx context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
			return refusingDecider{memory.NewDecider()}, nil
		},
	})
}

type refusingDecider struct{ *memory.Decider }

func (refusingDecider) WriteEntry(context.Context, *entry.RaceEntry) (entry.LeaderToken, error) {
	return entry.LeaderToken{}, fmt.Errorf("refusing: write x: permission denied: %w", entry.ErrRefused)
}

func (refusingDecider) String() string { return "refusing://x" }

// lateExtensionScheme is a store whose first extension of each tenure lands
// lateBy before the term ends, as after one slow write.
const (
	lateExtensionScheme = "lateext"
	lateBy              = 400 * time.Millisecond
)

func init() {
	leaderelection.RegisterScheme(lateExtensionScheme, leaderelection.URLOpener{
		Form: "lateext://NAME",
		Open: func(ctx context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
			return &lateExtension{Decider: memory.NewDecider()}, nil
		},
	})
}

type lateExtension struct {
	*memory.Decider
	mu     sync.Mutex
	expiry time.Time // the current tenure's, as acquired
	slowed bool
}

func (d *lateExtension) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	d.mu.Lock()
	switch {
	case e.Released || e.ElectionNumber == e.Term:
		d.expiry, d.slowed = e.TermExpiry, false
	case !d.slowed:
		d.slowed = true
		until := d.expiry.Add(-lateBy)
		d.mu.Unlock()
		time.Sleep(time.Until(until)) // the slow write
		return d.Decider.WriteEntry(context.WithoutCancel(ctx), e)
	}
	d.mu.Unlock()
	return d.Decider.WriteEntry(ctx, e)
}

// TestRunLateExtensionWithoutGrace: with --grace 0, an extension that lands
// a little before the watchdog would kill (lateBy before the term ends: 200
// ms before the kill, 100 ms before leaderelect's last look, and 100 ms
// after the look before) reaches the watchdog in time, and COMMAND runs on
// to exit by itself. (leaderelect used
// to look last at the very instant of the kill, and the watchdog killed
// COMMAND, whose status 137 run then took for COMMAND's own.)
func TestRunLateExtensionWithoutGrace(t *testing.T) {
	var stdout, stderr testenv.SyncBuffer
	o := dispatch([]string{"run", "--store", "lateext://x", "--term=4s", "--skew=100ms", "--grace=0s", "--", "sleep", "4.5"}, &stdout, &stderr)
	if o.code != 0 || o.signal != 0 || strings.Contains(stderr.String(), "killed") || strings.Contains(stderr.String(), "stopping the command") {
		t.Errorf("a command whose term was extended in time: exit %+v, want 0, with no kill\n%s", o, &stderr)
	}
}

// TestRunStoreRefuses: when Acquire gives up on a refusal, run exits 125
// naming the store, instead of retrying forever.
func TestRunStoreRefuses(t *testing.T) {
	var stdout, stderr testenv.SyncBuffer
	done := make(chan outcome, 1)
	go func() {
		done <- dispatch([]string{"run", "--store", "refusing://x", "--term=1s", "--skew=100ms", "--", "true"}, &stdout, &stderr)
	}()
	select {
	case o := <-done:
		if o.code != exitFailed || !strings.Contains(stderr.String(), "leaderelect run: the store refusing://x refused: ") {
			t.Errorf("exit %+v, stderr:\n%s\nwant %d and the store named", o, &stderr, exitFailed)
		}
	case <-time.After(patience):
		t.Fatalf("run still campaigns %v after its write was refused for good; Acquire must return an error wrapping ErrRefused\n%s", patience, &stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
)

// readme returns the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeBlock returns the lines of README.md from the one starting with
// first up to (not including) the next one starting with "$ " or "```".
func readmeBlock(t *testing.T, first string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(readme(t), "\n"+first)
	if !ok {
		t.Fatalf("README.md has no line starting with %q", first)
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n")[1:] {
		if strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "```") {
			break
		}
		lines = append(lines, l)
	}
	return lines
}

// labels is the first column of status output: the row labels.
func labels(lines []string) []string {
	var l []string
	for _, line := range lines {
		if k, _, ok := strings.Cut(line, "  "); ok {
			l = append(l, k)
		}
	}
	return l
}

// TestREADMEStatusAndWatchSamples fails when the README's samples of status
// and watch no longer have the shape of what they print: status's row labels
// for a leading record, and watch's line format. Timings may differ.
func TestREADMEStatusAndWatchSamples(t *testing.T) {
	status := statusWhileLeading(t, "worker-a", nil)
	got := labels(strings.Split(strings.TrimSpace(status), "\n"))
	inREADME := labels(readmeBlock(t, "$ leaderelect status --store "))
	if !slices.Equal(got, inREADME) {
		t.Errorf("README.md's status sample has rows %q; status prints %q\n%s", inREADME, got, status)
	}

	// changeLine's format, with any change kind, time and names.
	line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)  (elected |extended|released|expired ) {2}term \d+ *leader \S+(  until \d\d:\d\d:\d\d\.\d{3} \((in [\d.]+m?s|[\d.]+m?s ago)\))?$`)
	watch := readmeBlock(t, "$ leaderelect watch --store ")
	if len(watch) == 0 {
		t.Error("README.md's watch sample is empty")
	}
	for _, l := range watch {
		if !line.MatchString(l) {
			t.Errorf("README.md's watch sample line %q does not have the form watch prints", l)
		}
	}
	now := time.Now()
	for _, c := range []leaderelection.Change{
		{Kind: leaderelection.LeaderElected}, {Kind: leaderelection.TermExtended},
		{Kind: leaderelection.LeaderReleased}, {Kind: leaderelection.TermExpired},
	} {
		c.Entry.LeaderID, c.Entry.TermExpiry = "worker-a", now.Add(time.Second)
		if l := changeLine(now, c); !line.MatchString(l) {
			t.Errorf("watch prints %q, which the README check does not expect: update the check and the sample", l)
		}
	}
}

// TestEveryStoreDocumented fails when a scheme leaderelect registers is
// missing from its help or from the README's table of store URLs.
func TestEveryStoreDocumented(t *testing.T) {
	_, table, _ := strings.Cut(readme(t), "\n### Store URLs\n")
	table, _, _ = strings.Cut(table, "\n## ")
	forms := leaderelection.Schemes()
	// The in-tree schemes (postgres twice) and this package's test ones: fewer
	// means a blank import in stores.go went missing.
	if len(forms) < 10 {
		t.Fatalf("only %d schemes registered: %q", len(forms), forms)
	}
	for _, form := range forms {
		scheme, _, _ := strings.Cut(form, "://")
		if scheme == refusingScheme || scheme == lateExtensionScheme {
			continue
		}
		if !strings.Contains(storeURLHelp, scheme+"://") {
			t.Errorf("leaderelect's help does not mention %s:// (%s)", scheme, form)
		}
		if !strings.Contains(table, "`"+scheme+"://") {
			t.Errorf("README.md's Store URLs table does not mention %s:// (%s)", scheme, form)
		}
	}
}

// statusWhileLeading elects a candidate with id and hostPort on a file
// store, and returns what status prints while it leads.
func statusWhileLeading(t *testing.T, id string, hostPort []string) string {
	t.Helper()
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
			Decider: d, LeaderID: id, HostPort: hostPort, TermLength: 4 * time.Second, MaxClockSkew: 500 * time.Millisecond,
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
	return stdout.String()
}

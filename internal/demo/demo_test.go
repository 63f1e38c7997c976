package demo

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// run runs the demo in a synctest bubble, where its default 20 seconds pass
// at once.
func run(t *testing.T, o Options) string {
	t.Helper()
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		ok, err := Run(t.Context(), &out, o)
		if err != nil || !ok {
			t.Fatalf("Run = %v, %v\n%s", ok, err, &out)
		}
	})
	return out.String()
}

var defaults = Options{Term: 4 * time.Second, Skew: 500 * time.Millisecond, Candidates: 3}

func TestStory(t *testing.T) {
	text := run(t, defaults)
	// The shut-down leader's release may be replaced before the watcher
	// reads it, so its "released" line is not required.
	order := []string{"ELECTED", "PAUSES", "term ended", "took over", "REJECTS", "CRASHES", "took over", "restarts", "SHUTS DOWN", "took over", "released", "Summary"}
	rest := text
	for _, w := range order {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("demo output lacks %q in the expected order:\n%s", w, text)
		}
		rest = rest[i+len(w):]
	}
	if !strings.Contains(text, "1 rejected") {
		t.Errorf("demo output does not report one rejected write:\n%s", text)
	}
	t.Logf("\n%s", text)
}

func TestTwoCandidates(t *testing.T) {
	run(t, Options{Term: time.Second, Skew: 100 * time.Millisecond, Candidates: 2})
}

// shape is what of the demo's output must not drift from the README's
// sample: the column header, each timeline line's event, and each summary
// row's label, in order. Timings, names and tokens may differ from run to
// run.
func shape(text string) []string {
	var s []string
	timeline := regexp.MustCompile(`^\s*\d+\.\d\ds  (\S+)?\s+(\S.*?)\s{2,}`)
	summaryRow := regexp.MustCompile(`^  ([a-z][a-z ()]*:)\s`)
	for _, line := range strings.Split(text, "\n") {
		switch m := timeline.FindStringSubmatch(line); {
		case strings.HasPrefix(strings.TrimSpace(line), "time  who"):
			s = append(s, "header: "+strings.Join(strings.Fields(line), " "))
		case m != nil:
			s = append(s, "event: "+m[2])
		case strings.HasPrefix(line, "Summary after"):
			s = append(s, "Summary")
		default:
			if m := summaryRow.FindStringSubmatch(line); m != nil {
				s = append(s, "row: "+m[1])
			}
		}
	}
	return s
}

// readmeSample is the first fenced block after the line "go run ./cmd/demo"
// in the README's "Two commands" section.
func readmeSample(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\ngo run ./cmd/demo\n```\n")
	if !ok {
		t.Fatal("README.md has no block with the line `go run ./cmd/demo`")
	}
	_, rest, ok = strings.Cut(rest, "```\n")
	sample, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("README.md: no sample output block after `go run ./cmd/demo`")
	}
	return sample
}

// TestREADMESample fails when the README's sample output no longer has the
// shape of what the demo prints. Regenerate it with "go run ./cmd/demo".
func TestREADMESample(t *testing.T) {
	want := shape(run(t, defaults))
	got := shape(readmeSample(t))
	// The shut-down leader's release is seen in some runs only.
	drop := func(s []string) []string {
		return slices.DeleteFunc(slices.Clone(s), func(l string) bool { return l == "event: released" })
	}
	if !slices.Equal(drop(got), drop(want)) {
		t.Errorf("README.md's demo sample has drifted from the demo's output; rerun `go run ./cmd/demo` and paste it.\nREADME:\n  %s\ndemo:\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

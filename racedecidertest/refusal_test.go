package racedecidertest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// errRecorder keeps what a check reports instead of failing the test.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper() {}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckRefusal(t *testing.T) {
	refusal := fmt.Errorf("store x://b/o: %w: the endpoint https://h answers in plain HTTP", entry.ErrRefused)
	for _, c := range []struct {
		name  string
		err   error
		wants []string
		fails int
	}{
		{"a refusal saying everything", refusal, []string{"x://b/o", "https://h"}, 0},
		{"a refusal not naming the object", refusal, []string{"x://b/other", "https://h"}, 1},
		{"an unknown outcome", errors.New("x://b/o: connection reset"), []string{"x://b/o"}, 1},
		{"no error", nil, nil, 1},
	} {
		r := &errRecorder{TB: t}
		racedecidertest.CheckRefusal(r, "ReadCurrent", c.err, c.wants...)
		if len(r.errs) != c.fails {
			t.Errorf("%s: CheckRefusal reported %q; want %d failures", c.name, r.errs, c.fails)
		}
	}
}

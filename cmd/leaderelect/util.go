package main

import (
	"fmt"
	"strings"
	"time"
)

// maxDuration bounds --term and --poll, as leaderelection.Config.Validate
// and WatchConfig.Validate bound TermLength and PollInterval.
const maxDuration = 24 * time.Hour

// timingProblems checks --term and --skew as leaderelection.Config.Validate
// would, in terms of the flags.
func timingProblems(term, skew time.Duration) []string {
	var p []string
	if term <= 0 {
		p = append(p, fmt.Sprintf("--term (%s) must be positive", term))
	}
	if skew < 0 {
		p = append(p, fmt.Sprintf("--skew (%s) must not be negative", skew))
	}
	if len(p) > 0 {
		return p
	}
	if term < time.Millisecond || term > maxDuration {
		p = append(p, fmt.Sprintf("--term (%s) must be between 1ms and %v", term, maxDuration))
	}
	// term - skew <= skew is term <= 2 x skew without the overflow.
	if term-skew <= skew {
		p = append(p, fmt.Sprintf("--term (%s) must be greater than 2 x --skew (%s); 4 x or more is recommended", term, skew))
	}
	return p
}

func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }

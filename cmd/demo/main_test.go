package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"--help"}, stdout: "--candidates"},
		{args: []string{"--candidates=1"}, code: 2, stderr: "--candidates (1) must be from 2 to 9"},
		{args: []string{"--term=1s", "--skew=600ms"}, code: 2, stderr: "must be greater than 2 x --skew"},
		{args: []string{"--term=1s", "--skew=2562047h"}, code: 2, stderr: "must be greater than 2 x --skew"},
		{args: []string{"--term=500us"}, code: 2, stderr: "--term (500µs) must be at least 1ms"},
		{args: []string{"--term=0s"}, code: 2, stderr: "--term (0s) must be at least 1ms"},
		{args: []string{"extra"}, code: 2, stderr: "unexpected arguments"},
		{args: []string{"--term=2"}, code: 2, stderr: "parse error"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, &stdout, &stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// TestShortRun runs the whole story with a short term, in real time.
func TestShortRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--term=300ms"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "at most one leader at a time:    yes") {
		t.Errorf("no safety verdict:\n%s", &stdout)
	}
}

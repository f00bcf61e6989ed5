package main

import (
	"strings"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	r := runPetrel(t, 10*time.Second, "version")
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, "petrel ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("version printed %q, want petrel <version> (go1.x ...)", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"},
		{"help"},
		{"node", "--help"},
		{"demo", "--help"},
		{"version", "--help"},
		{"bench", "--help"},
		{"bench"},
		{"bench", "local", "--help"},
		{"bench", "local", "-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, args...)
			r.wantCode(t, exitOK)
			if !strings.Contains(r.stdout, "Usage:") {
				t.Errorf("stdout has no usage:\n%s", r.stdout)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string // a part of the error line
	}{
		{"bad int flag", []string{"bench", "local", "--producers", "x"}, `invalid argument "x" for "--producers"`},
		{"bad sync", []string{"bench", "local", "--sync", "fast"}, `"fast" for "--sync"`},
		{"zero producers", []string{"bench", "local", "--producers", "0"}, `"--producers" flag: want at least 1`},
		{"unknown flag", []string{"--bogus"}, "unknown flag: --bogus"},
		{"unknown subcommand flag", []string{"demo", "--bogus"}, "unknown flag: --bogus"},
		{"unknown command", []string{"nosuch"}, `unknown command "nosuch" for "petrel"`},
		{"unknown bench", []string{"bench", "nosuch"}, `unknown command "nosuch" for "petrel bench"`},
		{"suggestion", []string{"demoo"}, `did you mean "demo"?`},
		{"extra argument", []string{"node", "extra"}, "takes no arguments"},
		{"missing flag value", []string{"node", "-c"}, "flag needs an argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, tc.args...)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) || !strings.Contains(r.stderr, "Usage:") {
				t.Errorf("stderr lacks %q and usage:\n%s", tc.stderr, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
		})
	}
}

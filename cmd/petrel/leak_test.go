package main

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
)

// The commands that start goroutines stop them all before they return:
// run in-process, nothing of theirs may outlive them.
func TestCommandsLeaveNoGoroutines(t *testing.T) {
	for _, args := range [][]string{
		{"demo"},
		{"bench", "local", "--messages", "2000", "--producers", "4", "--consumers", "2", "--sync", "normal"},
	} {
		t.Run(args[0], func(t *testing.T) {
			defer goleak.VerifyNone(t)
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
			}
		})
	}
}

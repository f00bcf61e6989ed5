package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// petrelBin is the binary under test, built once by TestMain. The tests run
// it as a user would, so exit statuses, stdout and stderr are the real ones.
var petrelBin string

// buildFlags are extra `go build` flags; race_test.go adds -race, so that
// under `go test -race` the binary's own goroutines are checked too.
var buildFlags []string

// petrelEnv is the environment of the binary. A race-enabled binary sleeps
// a second at exit by default, waiting for late reports; a report still
// makes it exit 66, so the tests need no sleep.
var petrelEnv = append(os.Environ(), "GORACE=atexit_sleep_ms=0")

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "petrel-test-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	petrelBin = filepath.Join(dir, "petrel")
	args := append([]string{"build", "-o", petrelBin}, buildFlags...)
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build petrel: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// lastBytes is the end of out, at most 4 KiB: a run cut short may have
// printed megabytes that would bury the failure.
func lastBytes(out string) string {
	const most = 4 << 10
	if len(out) <= most {
		return out
	}
	return fmt.Sprintf("[%d bytes before]\n%s", len(out)-most, out[len(out)-most:])
}

// result is what one run of the binary left.
type result struct {
	stdout, stderr string
	code           int
}

// runPetrel runs the binary with args in dir (the test's temp dir when
// empty) and fails the test if it does not exit within timeout.
func runPetrel(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, petrelBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = petrelEnv
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("petrel %q did not exit within %v\nstdout (its end):\n%s\nstderr (its end):\n%s", args, timeout, lastBytes(stdout.String()), lastBytes(stderr.String()))
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run petrel %q: %v", args, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// wantCode fails the test unless r exited with code, showing its output.
func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

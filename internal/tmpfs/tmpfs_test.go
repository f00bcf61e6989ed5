package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record what they were
// told and end the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped = fmt.Sprintf(f, a...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = fmt.Sprintf(f, a...)
	runtime.Goexit()
}

// refused runs unavailable in its own goroutine, as a test would.
func refused(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		unavailable(r, "mount -t tmpfs refused: permission denied")
	}()
	<-done
	return r
}

// A refused mount fails, in CI or not, unless tmpfs mounts are declared
// unavailable; then it is a skip that says the test did not run.
func TestRefusedMountIsReported(t *testing.T) {
	cases := []struct {
		ci, noTmpfs string
		fails       bool
	}{
		{"true", "", true},
		{"true", "1", false},
		{"", "", true},
		{"", "0", true},
		{"", "1", false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("CI=%q %s=%q", tc.ci, EnvNoTmpfs, tc.noTmpfs), func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvNoTmpfs, tc.noTmpfs)
			r := refused(t)
			if got := r.failed != ""; got != tc.fails {
				t.Fatalf("failed %v (%q), skipped %q; want failed %v", got, r.failed, r.skipped, tc.fails)
			}
			said := r.failed + r.skipped
			if !strings.Contains(said, "permission denied") || !strings.Contains(said, EnvNoTmpfs) {
				t.Fatalf("the report %q does not say why, nor how to declare tmpfs unavailable", said)
			}
			if !tc.fails && !strings.Contains(said, "NOT RUN") {
				t.Fatalf("the skip %q does not say the test did not run", said)
			}
		})
	}
}

// The mount is real: a file larger than the tmpfs fills it up.
func TestMountFillsUp(t *testing.T) {
	dir := Mount(t, "1m")
	err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("wrote 2 MiB on a 1 MiB tmpfs: %v, want ENOSPC", err)
	}
}

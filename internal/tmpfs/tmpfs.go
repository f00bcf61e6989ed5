// Package tmpfs mounts small real filesystems for the tests that must see
// one fill up: the store's, the spool's and a node's full-disk tests. It
// is for tests only, and imports nothing of Petrel.
package tmpfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// EnvNoTmpfs set to "1" says that tmpfs mounts are unavailable on this
// machine: the full-disk tests are then skipped, saying so. Without it a
// refused mount fails the test, on every machine: a skip that nobody asked
// for would let the full-disk behaviour go untested unseen.
const EnvNoTmpfs = "PETREL_NO_TMPFS"

// Mount mounts a tmpfs of size ("2m", "16m") on a new temporary directory
// and returns it; it is unmounted when the test ends. Without root, or
// where mount fails, the test fails unless PETREL_NO_TMPFS=1 says that
// tmpfs mounts are unavailable; then it is skipped with a message that
// says what was not tested and why.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		unavailable(t, fmt.Sprintf("mount -t tmpfs refused: %v %s", err, bytes.TrimSpace(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// unavailable ends a test that needs a tmpfs it cannot have: a failure,
// unless tmpfs mounts are declared unavailable, and then a skip. Either way
// the message says that the full-disk behaviour went untested.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvNoTmpfs) == "1" {
		t.Skipf("full-disk test NOT RUN: %s, and %s=1 says tmpfs mounts are unavailable here", why, EnvNoTmpfs)
	}
	t.Fatalf("full-disk test cannot run: %s. Run it as root where mount is allowed, or set %s=1 to declare tmpfs mounts unavailable and skip it", why, EnvNoTmpfs)
}

// Grow remounts the tmpfs at dir with a new size.
func Grow(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
}

// Fill appends to the file at path, making it if needed, until its
// filesystem is full (ENOSPC). Any other error fails the test.
func Fill(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return
		}
	}
}

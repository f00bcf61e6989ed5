// Package tmpfs mounts small real filesystems for the tests that must see
// one fill up: the store's, the spool's and a node's full-disk tests. It
// is for tests only, and imports nothing of Petrel.
package tmpfs

import (
	"os"
	"os/exec"
	"testing"
)

// Mount mounts a tmpfs of size ("2m", "16m") on a new temporary directory
// and returns it; it is unmounted when the test ends. Without root, or
// where mount fails, the test is skipped.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// Grow remounts the tmpfs at dir with a new size.
func Grow(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
}

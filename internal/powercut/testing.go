package powercut

import (
	"os"
	"path/filepath"
	"testing"
)

// NoFUSEEnv names the variable that says FUSE is unavailable on this
// machine: with it set to 1, the tests that need a mount skip, saying so.
// Without it a mount that fails fails the test: a machine that should run
// the power-loss tests must not pass by skipping them.
const NoFUSEEnv = "PETREL_NO_FUSE"

// MountForTest mounts a power-cut filesystem in a temporary directory of
// t, unmounted when t ends (after the cleanups registered later, such as
// killing the processes that use it).
func MountForTest(t testing.TB, opt Options) *FS {
	t.Helper()
	if os.Getenv(NoFUSEEnv) == "1" {
		t.Skipf("%s=1: FUSE is unavailable here, so the power-cut filesystem cannot be mounted", NoFUSEEnv)
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	dir := t.TempDir()
	f, err := Mount(filepath.Join(dir, "mnt"), filepath.Join(dir, "backing"), opt)
	if err != nil {
		t.Fatalf("cannot mount the power-cut filesystem: %v\n"+
			"It needs /dev/fuse and the right to mount (root, or fusermount3 from Debian's fuse3).\n"+
			"Where FUSE cannot be had, set %s=1 to skip the tests that need it.", err, NoFUSEEnv)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}

package filetransfer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/petrelmq/petrel/internal/tmpfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// randomBytes returns n random bytes.
func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// infoOf returns the Info a receiver gets for data named name.
func infoOf(name string, data []byte) Info {
	sum := sha256.Sum256(data)
	return Info{Filename: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// mustSpool opens a spool in dir.
func mustSpool(t testing.TB, dir string) *Spool {
	t.Helper()
	s, err := OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeChunks writes data[from:] into in in chunks of size chunk, syncing
// after each when sync is set.
func writeChunks(t testing.TB, in *Incoming, data []byte, from int64, chunk int, sync bool) {
	t.Helper()
	for off := from; off < int64(len(data)); off += int64(chunk) {
		end := min(off+int64(chunk), int64(len(data)))
		if err := in.Write(off, data[off:end]); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
		if sync {
			if err := in.Sync(); err != nil {
				t.Fatalf("sync at %d: %v", end, err)
			}
		}
	}
}

// sameContent fails unless the file at path holds want.
func sameContent(t testing.TB, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes that differ from the %d sent", path, len(got), len(want))
	}
}

// dirNames lists the names in dir.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mountTmpfs mounts a tmpfs of the given size on a new directory and
// unmounts it at the end of the test. It skips the test where mounting is
// not possible (not root, no tmpfs).
func mountTmpfs(t testing.TB, size string) string { return tmpfs.Mount(t, size) }

// mustBegin begins (or resumes) the transfer id of the file info in sp.
func mustBegin(t testing.TB, sp *Spool, id string, info Info) *Incoming {
	t.Helper()
	in, err := sp.Begin(id, info)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

package powercut

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// The FUSE server's goroutines belong to the mount and end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, f *FS) CutReport {
	t.Helper()
	rep, err := f.Cut()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), trim(got), trim(want))
	}
}

func trim(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s survived the cut (%v), want it gone", filepath.Base(path), err)
	}
}

// TestSyncedKeptUnsyncedLost: what was fsynced survives a cut, what was
// written after it does not, whether it overwrote synced bytes or grew
// the file.
func TestSyncedKeptUnsyncedLost(t *testing.T) {
	f := MountForTest(t, Options{})
	p := filepath.Join(f.Dir(), "log")
	synced := bytes.Repeat([]byte("S"), 10000)
	writeFile(t, p, synced, true)
	syncDir(t, f.Dir())

	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("unsynced overwrite"), 5000); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(bytes.Repeat([]byte("U"), 9000), 10000); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	wantContent(t, p, append(append(append([]byte{}, synced[:5000]...), "unsynced overwrite"...), append(synced[5018:], bytes.Repeat([]byte("U"), 9000)...)...))

	rep := cut(t, f)
	t.Logf("cut: %s", rep)
	wantContent(t, p, synced)

	// A second round on the remounted layer: now the write is synced.
	fh, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("synced too"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(100); err != nil { // unsynced
		t.Fatal(err)
	}
	fh.Close()
	cut(t, f)
	wantContent(t, p, append([]byte("synced too"), synced[10:]...))
}

// TestUnsyncedCreateGone: a file whose directory was not fsynced vanishes,
// even if its own content was; once the directory is fsynced it stays.
func TestUnsyncedCreateGone(t *testing.T) {
	f := MountForTest(t, Options{})
	sub := filepath.Join(f.Dir(), "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	gone := filepath.Join(sub, "gone")
	writeFile(t, gone, []byte("content synced, name not"), true)
	unsyncedDir := filepath.Join(f.Dir(), "newdir")
	if err := os.Mkdir(unsyncedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(unsyncedDir, "x"), []byte("x"), true)
	syncDir(t, unsyncedDir)
	cut(t, f)
	wantGone(t, gone)
	wantGone(t, unsyncedDir)
	if _, err := os.Stat(sub); err != nil {
		t.Fatalf("the synced directory went: %v", err)
	}

	kept := filepath.Join(sub, "kept")
	writeFile(t, kept, []byte("kept"), true)
	syncDir(t, sub)
	empty := filepath.Join(sub, "empty")
	writeFile(t, empty, []byte("name synced, content not"), false)
	syncDir(t, sub)
	cut(t, f)
	wantContent(t, kept, []byte("kept"))
	wantContent(t, empty, nil)
}

// TestUnsyncedRenameAndUnlinkUndone: a rename over a synced file and an
// unlink are undone by a cut unless the directory was fsynced after them.
func TestUnsyncedRenameAndUnlinkUndone(t *testing.T) {
	f := MountForTest(t, Options{})
	dir := f.Dir()
	meta, victim := filepath.Join(dir, "meta"), filepath.Join(dir, "victim")
	writeFile(t, meta, []byte("old"), true)
	writeFile(t, victim, []byte("still here"), true)
	syncDir(t, dir)

	tmp := filepath.Join(dir, "meta.tmp")
	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, meta); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	rep := cut(t, f)
	t.Logf("cut: %s", rep)
	wantContent(t, meta, []byte("old"))
	wantContent(t, victim, []byte("still here"))
	wantGone(t, tmp)

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, meta); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	cut(t, f)
	wantContent(t, meta, []byte("new"))
	wantGone(t, victim)
	wantGone(t, tmp)
}

// TestKeepPrefix: with KeepPrefix a cut keeps the first writes, in order,
// the last possibly torn at a sector, and nothing after.
func TestKeepPrefix(t *testing.T) {
	f := MountForTest(t, Options{KeepPrefix: true, Seed: 7})
	p := filepath.Join(f.Dir(), "log")
	writeFile(t, p, nil, true)
	syncDir(t, f.Dir())
	const chunk, chunks = 2048, 40
	var all []byte
	for round := range 5 {
		base := len(all)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range chunks {
			b := bytes.Repeat([]byte{byte('a' + i%26)}, chunk)
			if _, err := fh.Write(b); err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		fh.Close()
		rep := cut(t, f)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %s; file %d bytes", round, rep, len(got))
		if rep.Writes != chunks {
			t.Fatalf("%d unsynced writes counted, want %d", rep.Writes, chunks)
		}
		if want := base + rep.Kept*chunk + rep.Torn; len(got) != want {
			t.Fatalf("file holds %d bytes, want %d", len(got), want)
		}
		if !bytes.Equal(got, all[:len(got)]) {
			t.Fatal("the kept bytes are not a prefix of what was written")
		}
		// Start the next round from what survived, synced.
		all = got
		fh, err = os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Sync()
		fh.Close()
	}
}

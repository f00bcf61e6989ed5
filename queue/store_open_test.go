package queue

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreRefusesAnEmptyDatabaseBesideItsLog: a database file truncated
// to nothing while its write-ahead log still holds the messages (a bad
// copy, a crash of the filesystem). SQLite took the empty file for a new
// store and reset the log: the node started empty and the messages were
// gone. The store now refuses to open, names the log, and leaves it be.
func TestStoreRefusesAnEmptyDatabaseBesideItsLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	s := openAt(t, path, nil)
	q := mustQueue(t, s, "q", KindReceive)
	for _, b := range bodies("m", 50) {
		mustPut(t, q, msg(4, b))
	}
	wal, err := os.ReadFile(path + "-wal")
	if err != nil || len(wal) <= 32 {
		t.Fatalf("the log while open: %d bytes, %v", len(wal), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, Config{Path: path, Logger: quiet})
	if err == nil {
		s2.Close()
		t.Fatal("an empty database beside a log of 50 messages opened")
	}
	if !strings.Contains(err.Error(), "write-ahead log") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("error %q, want the truncated database named", err)
	}
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() != int64(len(wal)) {
		t.Fatalf("the log after the refusal: %v, %v; want it untouched at %d bytes", st, err, len(wal))
	}
}

// TestStoreRefusesADatabaseItCannotWrite: a database file the node cannot
// write (here immutable, as on a read-only mount, or owned by another
// user after a restore) was opened read-only by SQLite without a word:
// the node said ready, then failed every send and every ack. The store
// now refuses to open and says why.
func TestStoreRefusesADatabaseItCannotWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	s := openAt(t, path, nil)
	mustPut(t, mustQueue(t, s, "q", KindReceive), msg(4, "one"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As root, file modes do not stop a write; the immutable attribute
	// does, where the filesystem has it.
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("cannot make the database immutable here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
	s2, err := Open(ctx, Config{Path: path, Logger: quiet})
	if err == nil {
		s2.Close()
		t.Fatal("a database the store cannot write opened")
	}
	if !strings.Contains(err.Error(), "cannot be opened for writing") {
		t.Fatalf("error %q, want the database named as not writable", err)
	}
}

package mqttgw

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// TestStoreRefusesAnEmptyDatabaseBesideItsLog: an mqtt.db truncated to
// nothing while its write-ahead log still holds the retained messages.
// SQLite took the empty file for a new database and reset the log: the
// node started without them. openStore now refuses, as the node's store
// does, names the log and leaves it be.
func TestStoreRefusesAnEmptyDatabaseBesideItsLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mqtt.db")
	s, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: "plant/state", Payload: []byte("up")}
	if err := s.setRetainedAll(ctx, []packets.Packet{pk}); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(path + "-wal")
	if err != nil || len(wal) <= 32 {
		t.Fatalf("the log while open: %d bytes, %v", len(wal), err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := openStore(path)
	if err == nil {
		s2.close()
		t.Fatal("an empty mqtt.db beside a log that holds a retained message opened")
	}
	if !strings.Contains(err.Error(), "write-ahead log") || !strings.Contains(err.Error(), "mqtt.db") {
		t.Fatalf("error %q, want the truncated database and its log named", err)
	}
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() != int64(len(wal)) {
		t.Fatalf("the log after the refusal: %v, %v; want it untouched at %d bytes", st, err, len(wal))
	}
}

// TestStoreRefusesADatabaseItCannotWrite: an mqtt.db the node cannot
// write (immutable here, as on a read-only mount) opened read-only: the
// node said ready, then failed every retained message and session it
// kept. openStore now refuses and says why.
func TestStoreRefusesADatabaseItCannotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mqtt.db")
	s, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	// As root, file modes do not stop a write; the immutable attribute
	// does, where the filesystem has it.
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("cannot make the database immutable here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
	s2, err := openStore(path)
	if err == nil {
		s2.close()
		t.Fatal("an mqtt.db the node cannot write opened")
	}
	if !strings.Contains(err.Error(), "cannot be opened for writing") {
		t.Fatalf("error %q, want the database named as not writable", err)
	}
}

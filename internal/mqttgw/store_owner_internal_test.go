package mqttgw

import (
	"context"
	"path/filepath"
	"testing"
)

// A store made before sessions had an owner gets the column at open; its
// sessions keep an empty owner, which hook.owner takes as held by nobody,
// and the next save names the owner.
func TestStoreOwnerColumnAdded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mqtt.db")
	db, err := openDB(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE sessions (client_id TEXT PRIMARY KEY, client BLOB NOT NULL);
		INSERT INTO sessions VALUES ('old-1', '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and a second open finds the column there
		s, err := openStore(path)
		if err != nil {
			t.Fatal(err)
		}
		owner, ok, err := s.sessionOwner(ctx, "old-1")
		if err != nil || !ok || owner != "" {
			t.Fatalf("owner of the old session %q, %v, %v; want an empty one", owner, ok, err)
		}
		if _, ok, err := s.sessionOwner(ctx, "none"); ok || err != nil {
			t.Fatalf("a session never stored: %v, %v", ok, err)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}

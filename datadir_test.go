package petrel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestDataDirNamesWithURICharacters: nodes whose data directories are
// named with the characters a SQLite file: URI gives a meaning to ('#',
// '?', '%') each keep their store, and their MQTT store, inside their own
// directory. Before, "site#1" and "site#2" both opened the database
// "site" beside them, and each node saw the other's messages.
func TestDataDirNamesWithURICharacters(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	names := []string{"site#1", "site#2", "site?x=1", "site%41"}
	var ns []*petrel.Node
	for _, name := range names {
		dir := filepath.Join(root, name)
		ns = append(ns, nodes.Open(t, nodes.Name("n"+string(rune('a'+len(ns)))), nodes.With(func(c *petrel.Config) {
			c.DataDir = dir
			c.MQTT.Listen = "127.0.0.1:0"
		})))
	}
	for i, n := range ns {
		m := n.Producer().CreateDataMessage("q")
		m.Body = []byte(names[i])
		if err := n.Producer().Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range ns {
		c, err := n.Consumer("q")
		if err != nil {
			t.Fatal(err)
		}
		d := receive(t, c)
		if string(d.Body) != names[i] {
			t.Fatalf("node in %q received %q", names[i], d.Body)
		}
		if err := c.Ack(d); err != nil {
			t.Fatal(err)
		}
		if ds, err := c.PollBatch(10); err == nil {
			t.Fatalf("node in %q holds %d more messages: another node's store", names[i], len(ds))
		}
		for _, db := range []string{"petrel.db", "mqtt.db"} {
			if _, err := os.Stat(filepath.Join(root, names[i], db)); err != nil {
				t.Errorf("%s is not in %q: %v", db, names[i], err)
			}
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			t.Errorf("%q beside the data directories: a store opened outside its directory", e.Name())
		}
	}
}

// TestDataDirLongerThanASocketAddress: a node whose data directory is
// too deep for a unix socket's address (107 bytes on Linux) starts, and
// its admin socket answers the CLI's client; it is gone once the node
// closes. Before, the node refused to start: "bind: invalid argument".
func TestDataDirLongerThanASocketAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("deep", 20), strings.Repeat("er", 20))
	sock := filepath.Join(dir, adminapi.SocketName)
	if len(sock) <= 107 {
		t.Fatalf("the socket's path is %d bytes: the test needs more than 107", len(sock))
	}
	n, err := petrel.Open(context.Background(), petrel.Config{Name: "deep", DataDir: dir, Logger: nodes.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	api := adminapi.Socket(dir)
	defer api.Close()
	var st petrel.Status
	if err := api.Do(context.Background(), "GET", "/api/status", nil, &st); err != nil {
		n.Close()
		t.Fatalf("status through the admin socket: %v", err)
	}
	if st.Node != "deep" {
		t.Errorf("status of %q through the socket, want deep", st.Node)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after close: %v", err)
	}
}

// TestDataDirOneNodeAtATime: Open on a data directory that another node
// has open fails at once with ErrInUse, and leaves that node working; the
// directory opens again once the node closed.
func TestDataDirOneNodeAtATime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := petrel.Config{Name: "twin", DataDir: dir, Logger: nodes.Quiet}
	first, err := petrel.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := petrel.Open(ctx, cfg); !errors.Is(err, petrel.ErrInUse) {
		if second != nil {
			second.Close()
		}
		first.Close()
		t.Fatalf("a second node on the directory: %v, want ErrInUse", err)
	}
	m := first.Producer().CreateDataMessage("q")
	if err := first.Producer().Send(ctx, m); err != nil {
		t.Fatalf("the first node after the refusal: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := petrel.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("the directory once the first node closed: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

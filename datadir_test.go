package petrel_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/petrelmq/petrel"
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

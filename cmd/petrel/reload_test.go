package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestNodeReloadsItsConfigFile edits the file of a running `petrel node`
// the way editors do, and reads the result with `petrel stat`.
func TestNodeReloadsItsConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "petrel.yaml")
	base := "node: {name: a, data_dir: data}\nlisten: 127.0.0.1:0\n"
	writeFile(t, cfg, base+"addresses: [{name: first}]\n")
	p := startNode(t, dir, "-c", cfg)
	p.ready(t)
	statOf := func() petrel.Status {
		r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"), "--json")
		r.wantCode(t, 0)
		var st petrel.Status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitStat := func(what string, cond func(petrel.Status) bool) petrel.Status {
		t.Helper()
		var st petrel.Status
		petreltest.Eventually(t, what, func() bool { st = statOf(); return cond(st) },
			func() string { return fmt.Sprintf("config status %+v, queues %+v", st.Config, st.Queues) })
		return st
	}
	hasQueue := func(st petrel.Status, name string) bool {
		return slices.ContainsFunc(st.Queues, func(q petrel.QueueStats) bool { return q.Name == name })
	}

	// A rename-style save adds an address.
	saveByRename(t, cfg, base+"addresses: [{name: first}, {name: second}]\n")
	// The reload makes the queue, then records its version: wait for both.
	st := waitStat("second address", func(st petrel.Status) bool { return hasQueue(st, "second") && st.Config.Version >= 2 })
	if st.Config.Version != 2 || st.Config.LastError != "" {
		t.Fatalf("after one save: %+v", st.Config)
	}

	// A bad edit is refused with its line; the running config stays.
	saveByRename(t, cfg, base+"addresses: [{name: first}, {name: second, role: sideways}]\n")
	st = waitStat("bad edit reported", func(st petrel.Status) bool { return st.Config.LastError != "" })
	if !strings.Contains(st.Config.LastError, "petrel.yaml:3") || st.Config.Version != 2 {
		t.Fatalf("bad edit: %+v", st.Config)
	}

	// A change of listen is reported as needing a restart, and not applied.
	saveByRename(t, cfg, "node: {name: a, data_dir: data}\nlisten: 127.0.0.1:1\naddresses: [{name: first}, {name: second}, {name: third}]\n")
	// The new queue can show before the reload finished; the version moves last.
	st = waitStat("restart reported", func(st petrel.Status) bool { return hasQueue(st, "third") && st.Config.Version == 3 })
	if !slices.Contains(st.Config.NeedsRestart, "listen") || st.Config.LastError != "" {
		t.Fatalf("listen change: %+v", st.Config)
	}
	if st.Listen == "127.0.0.1:1" {
		t.Fatal("listen was applied live")
	}
}

// saveByRename writes data next to path and renames it over path, as many
// editors save.
func saveByRename(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

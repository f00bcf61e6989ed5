package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// TestReloadLogNamesTheLogLevelItApplied: an edit of log.level and of a
// key that needs a restart logs the level among what was applied; it used
// to log applied=[] while the new level was in force.
func TestReloadLogNamesTheLogLevelItApplied(t *testing.T) {
	stderr := reloadedLog(t, "log: {level: warn}\nstore: {sync: normal}\n")
	var line string
	for l := range strings.Lines(stderr) {
		if strings.Contains(l, "some changes need a restart") {
			line = l
		}
	}
	if !strings.Contains(line, "applied=[log]") || !strings.Contains(line, "needs_restart=[store.sync]") {
		t.Fatalf("reload logged %q; want applied=[log] needs_restart=[store.sync]\nstderr:\n%s", line, stderr)
	}
}

// TestReloadOfTheLogLevelAloneIsLogged: the node's "configuration
// applied" line cannot name the log level, which the process applies; a
// line of its own says it was.
func TestReloadOfTheLogLevelAloneIsLogged(t *testing.T) {
	stderr := reloadedLog(t, "log: {level: debug}\n")
	for l := range strings.Lines(stderr) {
		if strings.Contains(l, "log level applied") && strings.Contains(l, "log_level=DEBUG") {
			return
		}
	}
	t.Fatalf("no line says the log level was applied\nstderr:\n%s", stderr)
}

// reloadedLog starts a node, adds edit to its configuration file, waits
// for the reload, stops the node and returns what it logged.
func reloadedLog(t *testing.T, edit string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "petrel.yaml")
	base := "node: {name: a, data_dir: data}\n"
	writeFile(t, cfg, base)
	p := startNode(t, dir, "-c", cfg)
	p.ready(t)
	saveByRename(t, cfg, base+edit)
	petreltest.Eventually(t, "the edit loaded", func() bool {
		r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"), "--json")
		var st petrel.Status
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Config.Version == 2
	}, func() string { return "config version not 2" })
	p.stop(t)
	return p.stderr.String()
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

// TestBackupTakesOverWithTheFileAsSaved edits a waiting backup's file, a
// live key (a new address) and a restart key (listen), then kills the live:
// the backup that takes over runs the file as it is then, both keys
// included, at version 1 with nothing pending, as a restart would.
func TestBackupTakesOverWithTheFileAsSaved(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Fatalf("127.0.0.2 is not usable on this machine (Linux routes all of 127/8 to lo): %v", err)
	} else {
		ln.Close()
	}
	dir := t.TempDir()
	pair := func(role, listen, addrs string) string {
		return fmt.Sprintf("node: {name: hub, data_dir: data}\nlisten: %s\nha: {role: %s}\nauto_create: false\naddresses: [%s]\n", listen, role, addrs)
	}
	livePath, backupPath := filepath.Join(dir, "live.yaml"), filepath.Join(dir, "backup.yaml")
	writeFile(t, livePath, pair("live", "127.0.0.1:0", "{name: first}"))
	writeFile(t, backupPath, pair("backup", "127.0.0.1:0", "{name: first}"))
	live := startNode(t, dir, "-c", livePath)
	live.ready(t)
	backup := startNode(t, dir, "-c", backupPath)
	select {
	case l := <-backup.lines:
		if !strings.HasPrefix(l, "waiting ") {
			t.Fatalf("backup's first line %q, want waiting", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("backup not waiting within 10s\nstderr:\n%s", backup.stderr)
	}
	// The backup read its file; the operator edits it while it waits.
	saveByRename(t, backupPath, pair("backup", "127.0.0.2:0", "{name: first}, {name: second}"))
	if err := live.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	fields := backup.ready(t)
	if !strings.HasPrefix(fields["listen"], "127.0.0.2:") {
		t.Errorf("backup listens on %s, want the listen saved while it waited (127.0.0.2)", fields["listen"])
	}
	var st petrel.Status
	// The store lists a new queue shortly after it is made.
	petreltest.Eventually(t, "a queue for the address saved while the backup waited", func() bool {
		r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"), "--json")
		r.wantCode(t, 0)
		st = petrel.Status{}
		return json.Unmarshal([]byte(r.stdout), &st) == nil &&
			slices.ContainsFunc(st.Queues, func(q petrel.QueueStats) bool { return q.Name == "second" })
	}, func() string { return fmt.Sprintf("queues %+v", st.Queues) })
	if st.Config.Version != 1 || st.Config.LastError != "" || len(st.Config.NeedsRestart) > 0 {
		t.Errorf("config status after the takeover %+v, want version 1, nothing pending or refused", st.Config)
	}
	if code := backup.stop(t); code != 0 {
		t.Errorf("backup exit %d\nstderr:\n%s", code, backup.stderr)
	}
}

// TestNodeRetriesARefusedReload saves an edit that names an outbox folder
// not made yet, with a new address: the node applies none of it and says
// why. Once the folder is made, touching the file applies the edit whole,
// and the outbox sends. An edit refused the same way and then put back
// leaves nothing refused.
func TestNodeRetriesARefusedReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "petrel.yaml")
	base := "node: {name: a, data_dir: data}\nlisten: 127.0.0.1:0\n"
	writeFile(t, cfg, base+"addresses: [{name: first}]\n")
	p := startNode(t, dir, "-c", cfg)
	p.ready(t)
	var st petrel.Status
	waitStat := func(what string, cond func(petrel.Status) bool) {
		t.Helper()
		petreltest.Eventually(t, what, func() bool {
			r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"), "--json")
			r.wantCode(t, 0)
			st = petrel.Status{}
			return json.Unmarshal([]byte(r.stdout), &st) == nil && cond(st)
		}, func() string { return fmt.Sprintf("config status %+v, queues %+v", st.Config, st.Queues) })
	}
	hasQueue := func(name string) bool {
		return slices.ContainsFunc(st.Queues, func(q petrel.QueueStats) bool { return q.Name == name })
	}

	edit := base + "addresses: [{name: first}, {name: second}]\noutboxes: [{dir: out, to: first, quiet: 50ms}]\n"
	saveByRename(t, cfg, edit)
	waitStat("the edit refused", func(st petrel.Status) bool { return strings.Contains(st.Config.LastError, "out") })
	if st.Config.Version != 1 || hasQueue("second") {
		t.Fatalf("a refused edit: version %d, queue second made %v; want version 1, nothing applied", st.Config.Version, hasQueue("second"))
	}

	// The operator makes the folder and touches the file.
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o750); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.Chtimes(cfg, now, now); err != nil {
		t.Fatal(err)
	}
	// The reload makes the queue, then records its version: wait for both.
	waitStat("the edit applied after the touch", func(st petrel.Status) bool { return st.Config.Version == 2 && hasQueue("second") })
	if st.Config.LastError != "" {
		t.Fatalf("after the touch: %+v", st.Config)
	}
	writeFile(t, filepath.Join(dir, "out", "f.txt"), "hello")
	petreltest.Eventually(t, "the outbox sent its file", func() bool {
		_, err := os.Stat(filepath.Join(dir, "out", "sent", "f.txt"))
		return err == nil
	})

	// Refused again, then put back: the file is what runs, nothing refused.
	saveByRename(t, cfg, base+"addresses: [{name: first}, {name: second}]\naccess: [{identity: ops, send: [first]}]\n"+
		"outboxes: [{dir: out, to: first, quiet: 50ms}, {dir: out2, to: first}]\n")
	waitStat("the second edit refused", func(st petrel.Status) bool { return strings.Contains(st.Config.LastError, "out2") })
	saveByRename(t, cfg, edit)
	waitStat("the refusal cleared", func(st petrel.Status) bool { return st.Config.LastError == "" })
	if st.Config.Version != 2 {
		t.Fatalf("put back: version %d, want 2", st.Config.Version)
	}
}

// TestNodeReloadsARotatedSecretFile rotates a client's secret by
// rewriting only the file its peers entry names, as a secret manager does:
// the node reloads by itself, the new secret gets in and the old one no
// longer does. The configuration file is not touched.
func TestNodeReloadsARotatedSecretFile(t *testing.T) {
	dir := t.TempDir()
	secretDir := t.TempDir() // elsewhere than the configuration, as /run/secrets is
	secret := filepath.Join(secretDir, "app-1.secret")
	writeFile(t, secret, "old-secret\n")
	cfg := filepath.Join(dir, "petrel.yaml")
	writeFile(t, cfg, "node: {name: a, data_dir: data}\nlisten: 127.0.0.1:0\n"+
		"peers:\n  - {name: app-1, kind: client, secret_file: "+secret+"}\n")
	p := startNode(t, dir, "-c", cfg)
	url := "tcp://" + p.ready(t)["listen"]
	dial := func(secret string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := petrel.Dial(ctx, url, petrel.DialOptions{Name: "app-1", Secret: secret})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("old-secret"); err != nil {
		t.Fatalf("the old secret before the rotation: %v", err)
	}
	writeFile(t, secret+".tmp", "new-secret\n") // mode 600, as a secret must be
	if err := os.Rename(secret+".tmp", secret); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the new secret accepted", func() bool { return dial("new-secret") == nil })
	if err := dial("old-secret"); err == nil {
		t.Fatal("the old secret still gets in after the rotation")
	}
}

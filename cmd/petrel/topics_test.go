package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
)

// TestTopicsCommand runs a node with a topic space, publishes to a topic
// that no subscription wants (dropped, and not an error), and lists the
// spaces, as JSON and as a table; then a durable subscription of that
// space, bounded by its max_queued_messages, holds two of three
// publishes and says it dropped one.
func TestTopicsCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, "node: {name: a, data_dir: data}\ntopics:\n  - pattern: events.#\n    max_queued_messages: 2\n")
	startNode(t, dir, "-c", cfg).ready(t)
	data := filepath.Join(dir, "data")
	run := func(args ...string) result {
		return runPetrel(t, 20*time.Second, append(args, "--data-dir", data)...)
	}
	run("send", "events.door.open", "hi").wantCode(t, exitOK)
	r := run("topics", "--json")
	r.wantCode(t, exitOK)
	got := jsonLines[adminapi.Topics](t, r.stdout)
	if len(got) != 1 || len(got[0].Spaces) != 1 || got[0].Spaces[0] != "events.#" || len(got[0].Subscriptions) != 0 {
		t.Fatalf("topics --json = %+v", got)
	}
	r = run("topics")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "topic spaces: events.#") || !strings.Contains(r.stdout, "SUBSCRIPTION") {
		t.Fatalf("topics printed %q", r.stdout)
	}
	run("subscribe", "events.#", "--durable", "audit", "--count", "1", "--wait", "100ms")
	for _, body := range []string{"a", "b", "c"} {
		run("send", "events.door.open", body).wantCode(t, exitOK)
	}
	got = jsonLines[adminapi.Topics](t, run("topics", "--json").stdout)
	if subs := got[0].Subscriptions; len(subs) != 1 || subs[0].Name != "audit" || subs[0].Depth != 2 || subs[0].MaxQueued != 2 || subs[0].Overflowed != 1 {
		t.Fatalf("topics --json, subscriptions %+v; want audit with depth 2, max queued 2, overflowed 1", subs)
	}
	r = run("topics")
	if !strings.Contains(r.stdout, "MAX  DROPPED") || !strings.Contains(r.stdout, "2      2    1") {
		t.Fatalf("topics printed %q", r.stdout)
	}
	// A topic is not a queue: nothing was stored for it.
	for _, q := range jsonLines[[]petrel.QueueStats](t, run("queues", "--json").stdout)[0] {
		if q.Name == "events.door.open" {
			t.Fatalf("a publish to a topic made a queue: %+v", q)
		}
	}
}

// TestPurgeSubscriptionQueue: the operating commands take a
// subscription's queue name.
func TestPurgeSubscriptionQueue(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, "node: {name: a, data_dir: data}\ntopics:\n  - pattern: events.#\n")
	startNode(t, dir, "-c", cfg).ready(t)
	r := runPetrel(t, 20*time.Second, "purge", "sub:audit", "--data-dir", filepath.Join(dir, "data"))
	// No such subscription: the node says so (not the argument check).
	if r.code == exitOK || strings.Contains(r.stderr, "has ':'") {
		t.Fatalf("purge sub:audit: code %d, stderr %q", r.code, r.stderr)
	}
}

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
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
	// Each key --help promises is there, forwards too when empty.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatalf("topics --json printed %q: %v", r.stdout, err)
	}
	for _, k := range []string{"spaces", "subscriptions", "forwards"} {
		if keys[k] == nil {
			t.Fatalf("topics --json printed %q: no key %q", r.stdout, k)
		}
	}
	if string(keys["forwards"]) != "[]" {
		t.Fatalf("topics --json printed %q: forwards %s, want []", r.stdout, keys["forwards"])
	}
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

// TestTopicsCommandForwards runs two linked node processes. b holds a
// durable subscription, which a learns; with b killed, a keeps two of
// three publishes toward b under topic_forward_max_queued and counts the
// third, and `petrel topics` at a prints that table.
func TestTopicsCommandForwards(t *testing.T) {
	dir := t.TempDir()
	listen := map[string]string{}
	for _, name := range []string{"a", "b"} {
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		listen[name] = "127.0.0.1:" + strconv.Itoa(port)
	}
	space := "topics:\n  - pattern: events.#\n"
	files := map[string]nodeproc.NodeFile{
		"a": {Name: "a", DataDir: filepath.Join(dir, "a"), Listen: listen["a"], Nodes: [][2]string{{"b", "tcp://" + listen["b"]}},
			ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, Window: 2,
			Extra: space + "topic_forward_max_queued: 2\n"},
		"b": {Name: "b", DataDir: filepath.Join(dir, "b"), Listen: listen["b"], Nodes: [][2]string{{"a", "tcp://" + listen["a"]}},
			ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, Extra: space},
	}
	procs := map[string]*nodeproc.Proc{}
	for _, name := range []string{"b", "a"} {
		if err := files[name].Write(filepath.Join(dir, name+".yaml")); err != nil {
			t.Fatal(err)
		}
		procs[name] = startProc(t, context.Background(), dir, name, "node", "-c", filepath.Join(dir, name+".yaml"))
		t.Cleanup(procs[name].Kill)
	}
	at := func(name string, args ...string) result {
		return runPetrel(t, 20*time.Second, append(args, "--data-dir", files[name].DataDir)...)
	}
	at("b", "subscribe", "events.#", "--durable", "audit", "--count", "1", "--wait", "100ms")
	// A publish at a that reaches b's subscription: a has learned b's
	// interest, and its queue toward b is drained.
	at("a", "send", "events.door.open", "first").wantCode(t, exitOK)
	topics := func(name string) adminapi.Topics {
		got := jsonLines[adminapi.Topics](t, at(name, "topics", "--json").stdout)
		if len(got) != 1 {
			t.Fatalf("topics --json at %s printed %d lines, want 1", name, len(got))
		}
		return got[0]
	}
	// And acked: what a holds toward b is empty before b goes.
	petreltest.Eventually(t, "the first publish at b's subscription, acked to a", func() bool {
		subs, fw := topics("b").Subscriptions, topics("a").Forwards
		return len(subs) == 1 && subs[0].Depth == 1 && len(fw) == 1 && fw[0].Depth == 0
	})
	procs["b"].Kill()
	for _, body := range []string{"second", "third", "fourth"} {
		at("a", "send", "events.door.open", body).wantCode(t, exitOK)
	}
	if fw := topics("a").Forwards; len(fw) != 1 || fw[0] != (adminapi.Forward{Neighbour: "b", Queue: "_petrel.topics@b", Depth: 2, MaxQueued: 2, Overflowed: 1}) {
		t.Fatalf("topics --json at a, forwards %+v; want b's queue with depth 2, max 2, overflowed 1", fw)
	}
	r := at("a", "topics")
	r.wantCode(t, exitOK)
	if !regexp.MustCompile(`(?m)^TOWARD\s+QUEUE\s+DEPTH\s+MAX\s+DROPPED$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^b\s+_petrel\.topics@b\s+2\s+2\s+1$`).MatchString(r.stdout) {
		t.Fatalf("topics at a printed %q; want the forwards table with b's queue at depth 2, max 2, 1 dropped", r.stdout)
	}
}

// TestSendInvalidTopicName: petrel send to a name that the topic space
// events.# matches but that is no topic name is refused by the node (exit
// 1) with the reason, and makes no queue; it made an anycast queue before.
func TestSendInvalidTopicName(t *testing.T) {
	_, run := startTopicNode(t)
	for _, name := range []string{"events..door", "events.", "events.-x"} {
		r := run("send", name, "typo")
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, `invalid topic name inside topic space "events.#"`) {
			t.Errorf("send %s: stderr %q", name, r.stderr)
		}
	}
	r := run("queues", "--json")
	r.wantCode(t, exitOK)
	for _, name := range []string{`"events..door"`, `"events."`, `"events.-x"`} {
		if strings.Contains(r.stdout, name) {
			t.Errorf("the node made the queue %s: %s", name, r.stdout)
		}
	}
}

// TestUnsubscribeCommand: petrel unsubscribe deletes a durable
// subscription and what it holds, named as petrel topics lists it or by
// its queue; a name no durable subscription has is an error that says so.
func TestUnsubscribeCommand(t *testing.T) {
	_, run := startTopicNode(t)
	for _, name := range []string{"audit", "billing"} {
		run("subscribe", "events.#", "--durable", name, "--count", "1", "--wait", "100ms")
	}
	for _, body := range []string{"a", "b"} {
		run("send", "events.door.open", body).wantCode(t, exitOK)
	}
	// The node's own subscriptions have no owner.
	if r := run("topics"); !strings.Contains(r.stdout, "DROPPED  OWNER") || !regexp.MustCompile(`(?m)^audit .* -$`).MatchString(r.stdout) {
		t.Fatalf("topics printed %q, want an OWNER column and - for audit", r.stdout)
	}
	r := run("unsubscribe", "audit")
	r.wantCode(t, exitOK)
	if want := "deleted subscription audit and the 2 messages it held\n"; r.stdout != want {
		t.Fatalf("unsubscribe printed %q, want %q", r.stdout, want)
	}
	r = run("unsubscribe", "sub:billing", "--json")
	r.wantCode(t, exitOK)
	if got := jsonLines[adminapi.CountResponse](t, r.stdout); len(got) != 1 || got[0].Queue != "sub:billing" || got[0].Count != 2 {
		t.Fatalf("unsubscribe --json printed %q", r.stdout)
	}
	if subs := subscriptions(t, run); len(subs) != 0 {
		t.Fatalf("subscriptions left: %+v", subs)
	}
	r = run("unsubscribe", "audit")
	if r.code == exitOK || !strings.Contains(r.stderr, "no durable subscription") {
		t.Fatalf("unsubscribe of a name no subscription has: exit %d, stderr %q", r.code, r.stderr)
	}
}

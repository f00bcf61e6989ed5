package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestStatAgainstRunningNode runs `petrel node` with a send address toward
// a node that is down, then reads it with `petrel stat`: the link shows up
// backing off with its last error, and the queues with their figures.
func TestStatAgainstRunningNode(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, `node: {name: a, data_dir: data}
nodes: [{name: b, connector: "tcp://127.0.0.1:1"}]
link: {reconnect_min: 10ms, reconnect_max: 50ms}
addresses:
  - {name: orders, role: send, node: b}
  - {name: local}
`)
	p := startNode(t, dir, "-c", cfg)
	p.ready(t)

	var st petrel.Status
	petreltest.Eventually(t, "the link reported backing off", func() bool {
		r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"), "--json")
		r.wantCode(t, 0)
		st = petrel.Status{}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("stat --json is not one JSON object: %v\n%s", err, r.stdout)
		}
		return len(st.Links) == 1 && st.Links[0].Reconnects > 0 && st.Links[0].LastError != ""
	}, func() string { return fmt.Sprintf("links %+v", st.Links) })
	if st.Node != "a" || st.Links[0].Queue != "orders@b" || st.Links[0].NextHop != "b" {
		t.Fatalf("status %+v", st)
	}
	names := map[string]bool{}
	for _, q := range st.Queues {
		names[q.Name] = true
	}
	if !names["orders@b"] || !names["local"] {
		t.Fatalf("queues %+v", st.Queues)
	}
	// The link goes between "connecting" and "backing off" at every try:
	// read the text until it shows the wait.
	var r result
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r = runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "data"))
		r.wantCode(t, 0)
		if strings.Contains(r.stdout, "backing off") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{"links", "orders@b", "backing off", "queues", "local", "receiver"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("stat output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "nowhere"))
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "no node answers") {
		t.Fatalf("stat of a dead node: %s", r.stderr)
	}
	r = runPetrel(t, 10*time.Second, "stat", "--data-dir", "x", "-c", cfg)
	r.wantCode(t, 2)
}

// TestStatShowsTopics: petrel stat lists the topic spaces, with their
// keep policy and what it holds, and the subscriptions with pattern,
// depth and consumers, as text and as JSON.
func TestStatShowsTopics(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, `node: {name: a, data_dir: data}
topics:
  - {pattern: events.#, max_queued_messages: 50}
  - {pattern: orders.#, keep: {messages: 100, age: 1h}}
`)
	startNode(t, dir, "-c", cfg).ready(t)
	data := filepath.Join(dir, "data")
	run := func(args ...string) result {
		return runPetrel(t, 20*time.Second, append(args, "--data-dir", data)...)
	}
	run("subscribe", "events.door.*", "--durable", "audit").wantCode(t, exitOK)
	run("send", "events.door.open", "one").wantCode(t, exitOK)
	run("send", "events.door.close", "two").wantCode(t, exitOK)
	run("send", "orders.eu.created", "held").wantCode(t, exitOK)
	r := run("stat", "--json")
	r.wantCode(t, exitOK)
	var st petrel.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("stat --json: %v\n%s", err, r.stdout)
	}
	tp := st.Topics
	if len(tp.Spaces) != 2 || tp.Spaces[1].Pattern != "orders.#" || tp.Spaces[1].Keep.Messages != 100 || tp.Spaces[1].Keep.Age != time.Hour || tp.Spaces[1].Held != 1 {
		t.Fatalf("topic spaces %+v", tp.Spaces)
	}
	if len(tp.Subscriptions) != 1 || tp.Subscriptions[0].Name != "audit" || tp.Subscriptions[0].Pattern != "events.door.*" ||
		tp.Subscriptions[0].Depth != 2 || tp.Subscriptions[0].Consumers != 0 || tp.Subscriptions[0].MaxQueued != 50 || tp.Spaces[0].MaxQueued != 50 {
		t.Fatalf("subscriptions %+v", tp.Subscriptions)
	}
	if tp.Published != 3 || tp.Kept != 1 {
		t.Fatalf("topic counters %+v", tp)
	}
	r = run("stat")
	r.wantCode(t, exitOK)
	for _, want := range []string{"topics  published 3", "SPACE", "orders.#  100 messages, 1h0m0s  1", "SUBSCRIPTION", "audit         events.door.*  true     0          2"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("stat output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// petrel stat's MQTT lines show what a resumed session will get again:
// the deliveries noted to resend under their identifiers, and the PUBRELs
// sent again so far.
func TestStatMQTTResends(t *testing.T) {
	var b strings.Builder
	printMQTT(&b, &petrel.MQTTStats{Listen: "127.0.0.1:1883", QoS2Pending: 2, ResendNoted: 3, ResentReleases: 1})
	if want := "qos2 awaiting pubrel 2  to resend 3  pubrels resent 1"; !strings.Contains(b.String(), want) {
		t.Fatalf("stat shows\n%s\nwant a line with %q", b.String(), want)
	}
}

// petrel stat's MQTT lines show the accept errors retried, and a
// listener that stopped accepting connections.
func TestStatMQTTListenerStopped(t *testing.T) {
	var b strings.Builder
	printMQTT(&b, &petrel.MQTTStats{Listen: "127.0.0.1:1883", AcceptErrors: 7})
	if want := "accept errors retried: tcp 7  websocket 0"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "NOT READY") {
		t.Fatalf("stat shows\n%s\nwant a line with %q, and none saying not ready", b.String(), want)
	}
	b.Reset()
	printMQTT(&b, &petrel.MQTTStats{Listen: "127.0.0.1:1883", ListenerError: "mqtt listener mqtt on 127.0.0.1:1883 stopped accepting connections: boom"})
	if want := "NOT READY: mqtt listener mqtt on 127.0.0.1:1883 stopped accepting connections: boom"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "accept errors") {
		t.Fatalf("stat shows\n%s\nwant a line with %q, and none of accept errors", b.String(), want)
	}
}

// TestStatWithTheFileOfARefusedEdit: petrel stat -c, given the file of a
// running node after an edit the node refused, still reaches that node
// (its data directory read from the file) and shows why the edit was
// refused, with a warning that the file has an error; it used to stop at
// the file's error with exit 2. After an edit of node.data_dir, which
// needs a restart, the error says where the socket was looked for and
// what to give instead.
func TestStatWithTheFileOfARefusedEdit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "petrel.yaml")
	data := filepath.Join(dir, "data")
	writeFile(t, cfg, "node: {name: a, data_dir: "+data+"}\n")
	startNode(t, dir, "-c", cfg).ready(t)

	saveByRename(t, cfg, "node: {name: a, data_dir: "+data+"}\nlink: {window: x}\n")
	var r result
	petreltest.Eventually(t, "the refused edit shown through -c", func() bool {
		r = runPetrel(t, 10*time.Second, "stat", "-c", cfg)
		return r.code == exitOK && strings.Contains(r.stdout, "last reload refused: ")
	}, func() string { return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr) })
	if !strings.Contains(r.stderr, "warning: "+cfg+":2:8: link.window") || !strings.Contains(r.stderr, "keeps the configuration it last loaded") {
		t.Fatalf("stat -c on a file with an error warns:\n%s", r.stderr)
	}

	saveByRename(t, cfg, "node: {name: a, data_dir: "+data+"2}\n")
	r = runPetrel(t, 10*time.Second, "stat", "-c", cfg)
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stderr, "no node answers") || !strings.Contains(r.stderr, "give that one with --data-dir") {
		t.Fatalf("stat -c after data_dir changed:\n%s", r.stderr)
	}
	petreltest.Eventually(t, "needs a restart shown through --data-dir", func() bool {
		r = runPetrel(t, 10*time.Second, "stat", "--data-dir", data)
		return r.code == exitOK && strings.Contains(r.stdout, "changed, needs a restart: node.data_dir")
	}, func() string { return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr) })
}

// TestStatShowsOutboxes: petrel stat lists each outbox folder with its
// address, and says so of one removed while the node runs, whose files
// wait until it is back; as text and as JSON.
func TestStatShowsOutboxes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, "node: {name: a, data_dir: data}\naddresses: [{name: inbox}]\noutboxes: [{dir: out, to: inbox, quiet: 50ms}]\n")
	p := startNode(t, dir, "-c", cfg)
	p.ready(t)
	data := filepath.Join(dir, "data")
	stat := func() (petrel.Status, string) {
		r := runPetrel(t, 10*time.Second, "stat", "--data-dir", data, "--json")
		r.wantCode(t, 0)
		var st petrel.Status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("stat --json: %v\n%s", err, r.stdout)
		}
		text := runPetrel(t, 10*time.Second, "stat", "--data-dir", data)
		text.wantCode(t, 0)
		return st, text.stdout
	}
	st, text := stat()
	if len(st.Outboxes) != 1 || st.Outboxes[0].Dir != out || st.Outboxes[0].To != "inbox" || !st.Outboxes[0].Watching {
		t.Fatalf("outboxes %+v, want %s -> inbox, watched", st.Outboxes, out)
	}
	if !strings.Contains(text, out+" -> inbox  watched") {
		t.Fatalf("stat lacks the outbox:\n%s", text)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the removed folder shown", func() bool {
		st, text = stat()
		return len(st.Outboxes) == 1 && !st.Outboxes[0].Watching && strings.Contains(text, "FOLDER GONE")
	}, func() string { return text })
}

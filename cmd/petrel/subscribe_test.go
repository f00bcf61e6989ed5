package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
)

// startTopicNode starts a node with the topic space events.# and returns
// a runner of petrel commands against it.
func startTopicNode(t *testing.T) (data string, run func(args ...string) result) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, "node: {name: a, data_dir: data}\ntopics:\n  - pattern: events.#\n")
	startNode(t, dir, "-c", cfg).ready(t)
	data = filepath.Join(dir, "data")
	return data, func(args ...string) result {
		return runPetrel(t, 30*time.Second, append(args, "--data-dir", data)...)
	}
}

// subscriptions returns the node's subscriptions, by petrel topics.
func subscriptions(t *testing.T, run func(args ...string) result) []adminapi.Subscription {
	t.Helper()
	r := run("topics", "--json")
	r.wantCode(t, exitOK)
	return jsonLines[adminapi.Topics](t, r.stdout)[0].Subscriptions
}

// TestSubscribeDurable: --durable makes a subscription that outlives the
// command and keeps what is published meanwhile; the next subscribe takes
// it, acked, in order, and filtered by the pattern.
func TestSubscribeDurable(t *testing.T) {
	_, run := startTopicNode(t)
	r := run("subscribe", "events.door.*", "--durable", "audit")
	r.wantCode(t, exitOK)
	if r.stdout != "" || !strings.Contains(r.stderr, "no message on events.door.*") {
		t.Fatalf("first subscribe printed %q, stderr %q", r.stdout, r.stderr)
	}
	for _, topic := range []string{"events.door.open", "events.window.open", "events.door.close"} {
		run("send", topic, "at "+topic).wantCode(t, exitOK)
	}
	subs := subscriptions(t, run)
	if len(subs) != 1 || subs[0].Name != "audit" || !subs[0].Durable || subs[0].Depth != 2 {
		t.Fatalf("subscriptions after two matching publishes: %+v", subs)
	}
	r = run("subscribe", "events.door.*", "--durable", "audit", "--count", "10", "--json")
	r.wantCode(t, exitOK)
	msgs := jsonLines[adminapi.Message](t, r.stdout)
	if len(msgs) != 2 || *msgs[0].Text != "at events.door.open" || *msgs[1].Text != "at events.door.close" {
		t.Fatalf("durable subscribe printed %+v", msgs)
	}
	if msgs[0].Destination != "events.door.open" {
		t.Fatalf("destination %q, want the topic published to", msgs[0].Destination)
	}
	r = run("subscribe", "events.door.*", "--durable", "audit")
	r.wantCode(t, exitOK)
	if r.stdout != "" {
		t.Fatalf("the acked messages came again: %q", r.stdout)
	}
	// The name is taken by another pattern: the node refuses.
	r = run("subscribe", "events.#", "--durable", "audit")
	if r.code == exitOK || !strings.Contains(r.stderr, "audit") {
		t.Fatalf("subscribe as audit with another pattern: code %d, stderr %q", r.code, r.stderr)
	}
	// A name that cannot be one is a bad command line.
	r = run("subscribe", "events.#", "--durable", "../x")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, `--durable "../x"`) {
		t.Fatalf("subscribe --durable ../x: stderr %q", r.stderr)
	}
	// So is one whose queue would be audit's dead-letter queue.
	r = run("subscribe", "events.#", "--durable", "audit.dlq")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, `dead-letter queue of subscription "audit"`) {
		t.Fatalf("subscribe --durable audit.dlq: stderr %q", r.stderr)
	}
}

// TestSubscribeTemporary: without --durable the subscription lasts for
// the command: it gets what is published while it waits, and is gone
// afterwards.
func TestSubscribeTemporary(t *testing.T) {
	data, run := startTopicNode(t)
	type outcome struct {
		stdout, stderr string
		err            error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		cmd := exec.CommandContext(ctx, petrelBin, "subscribe", "events.#", "--wait", "30s", "--count", "1", "--json", "--data-dir", data)
		cmd.Env = petrelEnv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		done <- outcome{stdout.String(), stderr.String(), err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(subscriptions(t, run)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the temporary subscription never appeared in petrel topics")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if subs := subscriptions(t, run); subs[0].Durable {
		t.Fatalf("temporary subscription is durable: %+v", subs)
	}
	run("send", "events.bell", "ding").wantCode(t, exitOK)
	o := <-done
	if o.err != nil {
		t.Fatalf("subscribe: %v\nstderr: %s", o.err, o.stderr)
	}
	msgs := jsonLines[adminapi.Message](t, o.stdout)
	if len(msgs) != 1 || *msgs[0].Text != "ding" {
		t.Fatalf("temporary subscribe printed %q", o.stdout)
	}
	if subs := subscriptions(t, run); len(subs) != 0 {
		t.Fatalf("subscriptions after the temporary one ended: %+v", subs)
	}
}

// TestSubscribeUsage: a temporary subscription needs --wait, and the
// pattern must parse; neither reaches a node.
func TestSubscribeUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"subscribe", "events.#"}, "give --wait"},
		{[]string{"subscribe", "events..#", "--wait", "1s"}, `pattern "events..#"`},
		{[]string{"subscribe", "events.café", "--wait", "1s"}, `word "café" has 'é'`},
		{[]string{"subscribe", "events.#", "--durable", "a", "--count", "0"}, "--count 0"},
	} {
		r := runPetrel(t, 10*time.Second, append(tc.args, "--data-dir", t.TempDir())...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("petrel %q: stderr lacks %q:\n%s", tc.args, tc.stderr, r.stderr)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/message"
)

// TestCrashNodeAfterRemoteAck runs b as a `petrel node` process, fills its
// queue through a client, consumes through a client and kills b with
// SIGKILL right after an Ack returned, at a random point, in several
// rounds. b is restarted on its data, stopped cleanly, and its queue read
// back whole.
//
// What the README promises ("Guarantees"): acks are group-committed
// without waiting, and a client's Ack returns once the ack is queued to
// the node, so an acked message may come back; none is lost. Petrel has no
// ack the API reports durable, so no acked message is required to be
// gone. The test requires that every message whose Ack had not returned is
// still stored, once, and whole (body, properties and headers as sent),
// that nothing is stored that was never sent, that the depth matches, and
// it reports how many acked messages came back.
func TestCrashNodeAfterRemoteAck(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs without -short")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PETREL_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with PETREL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const perRound, rounds = 300, 3
	var acked, back int
	for round := range rounds {
		a, b := ackRound(t, round, perRound, perRound/4+rng.IntN(perRound/2))
		acked += a
		back += b
	}
	t.Logf("remote acked-then-killed: %d acks returned over %d rounds, %d came back (%.1f%%), none lost",
		acked, rounds, back, 100*float64(back)/float64(max(acked, 1)))
}

// ackRound is one round of TestCrashNodeAfterRemoteAck: it returns how
// many acks returned before the kill and how many of those came back.
func ackRound(t *testing.T, round, count, killAt int) (int, int) {
	t.Helper()
	dir := t.TempDir()
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	cfgPath := filepath.Join(dir, "b.yaml")
	nf := nodeproc.NodeFile{Name: "b", DataDir: filepath.Join(dir, "b"), Listen: listen, Receive: []string{"acks"}}
	if err := nf.Write(cfgPath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func() *nodeproc.Proc {
		p, err := nodeproc.Start(ctx, "b", petrelBin, filepath.Join(dir, "b.stderr"), "node", "-c", cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if _, err := p.WaitReady(ctx); err != nil {
			t.Fatalf("round %d: start b: %v", round, err)
		}
		return p
	}
	proc := start()
	c, err := petrel.Dial(ctx, "tcp://"+listen, petrel.DialOptions{Name: "app", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.Producer()
	sent := map[string]bool{}
	for i := range count {
		m := ackMessage(p, fmt.Sprintf("r%d.%d", round, i))
		if err := p.Send(ctx, m); err != nil {
			t.Fatalf("round %d: send %d: %v", round, i, err)
		}
		sent[string(m.Body)] = true
	}
	cons, err := c.Consumer("acks")
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	for len(reported) < killAt {
		d, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("round %d: receive after %d: %v", round, len(reported), err)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("round %d: ack: %v", round, err)
		}
		reported[string(d.Body)] = true
	}
	// Right after the last Ack returned: the acks may still be on the wire,
	// in b's group commit, or committed.
	proc.Kill()
	c.Close()

	// b restarts on what it stored, and stops cleanly.
	proc = start()
	if err := proc.Stop(30 * time.Second); err != nil {
		t.Fatalf("round %d: stop restarted b: %v", round, err)
	}
	got := readAckQueue(t, nf.DataDir)
	lost, came, unexpected := 0, 0, 0
	for body := range sent {
		switch {
		case got[body] > 0 && reported[body]:
			came++
		case got[body] == 0 && !reported[body]:
			lost++
			if lost <= 10 {
				t.Errorf("round %d: %q lost: never acked, not stored", round, strings.TrimSpace(body))
			}
		}
	}
	dup := 0
	for body, n := range got {
		if !sent[body] {
			unexpected++
			t.Errorf("round %d: %q stored, never sent", round, body)
		}
		if n > 1 {
			dup++
			t.Errorf("round %d: %q stored %d times", round, strings.TrimSpace(body), n)
		}
	}
	t.Logf("round %d: sent %d, acks returned before the kill %d, acked and back %d; lost %d, duplicated %d, unexpected %d",
		round, count, len(reported), came, lost, dup, unexpected)
	return len(reported), came
}

// ackMessage is the message of key: a data message whose body is the key
// padded to 64 bytes, with a priority and properties derived from the key,
// so that a checker can rebuild it whole.
func ackMessage(p *petrel.Producer, key string) *message.Message {
	m := p.CreateDataMessage("acks")
	m.Body = []byte(key + strings.Repeat(" ", 64-len(key)))
	m.Data = message.DataProps{DataType: "ack-test", Encoding: "text"}
	m.Properties.Set("key", message.String(key))
	m.Properties.Set("len", message.Int32(int32(len(key))))
	return m
}

// readAckQueue opens b's stopped store and returns how many times each
// body is stored. Each message is compared whole with ackMessage of its
// key, and their number with the queue's depth.
func readAckQueue(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	node, err := petrel.Open(context.Background(), petrel.Config{Name: "b", DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open b's data: %v", err)
	}
	defer node.Close()
	st, _ := node.QueueStat("acks")
	c, err := node.Consumer("acks")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	read := 0
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			t.Fatalf("poll b's queue after %d: %v", read, err)
		}
		read++
		got[string(d.Body)]++
		key := strings.TrimRight(string(d.Body), " ")
		want := ackMessage(node.Producer(), key)
		var diff []string
		if string(d.Body) != string(want.Body) {
			diff = append(diff, fmt.Sprintf("body %q", d.Body))
		}
		if d.Kind != message.KindData || d.Data != want.Data || d.Priority != want.Priority || d.Destination != "acks" {
			diff = append(diff, fmt.Sprintf("headers kind %v data %+v priority %d destination %q", d.Kind, d.Data, d.Priority, d.Destination))
		}
		k, ok1 := d.Properties.Get("key")
		l, ok2 := d.Properties.Get("len")
		if len(d.Properties) != 2 || !ok1 || !ok2 || k.Type() != message.TypeString || k.Str() != key || l.Int32() != int32(len(key)) {
			diff = append(diff, fmt.Sprintf("properties %v", d.Properties))
		}
		if len(diff) > 0 {
			t.Errorf("stored message %q differs from the one sent: %s", key, strings.Join(diff, "; "))
		}
	}
	if int64(read) != st.Depth {
		t.Errorf("read %d messages, the queue's depth is %d", read, st.Depth)
	}
	return got
}

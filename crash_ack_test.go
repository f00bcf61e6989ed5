package petrel_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
)

const envCrashAckQueue = "PETREL_CRASH_ACK_QUEUE"

// TestCrashAckChild is the child process of TestCrashAfterAck. It receives
// from the queue it is given, acks each delivery, and prints "acked <key>"
// once Ack returned. It never returns by itself: the parent kills it.
func TestCrashAckChild(t *testing.T) {
	dir, addr := os.Getenv(envCrashDir), os.Getenv(envCrashAckQueue)
	if dir == "" || addr == "" {
		t.Skip("child process of TestCrashAfterAck")
	}
	n, err := petrel.Open(context.Background(), petrel.Config{Name: "crash", DataDir: dir, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	c, err := n.Consumer(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(3)
	}
	say := childSay()
	for {
		d, err := c.Receive(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "receive:", err)
			os.Exit(4)
		}
		key := string(d.Body[:strings.IndexByte(string(d.Body), ' ')])
		// Said before the Ack: an ack commits on its own, so the kill may
		// land after its commit and before "acked" is said.
		say("acking " + key)
		if err := d.Ack(); err != nil {
			fmt.Fprintln(os.Stderr, "ack:", err)
			os.Exit(4)
		}
		say("acked " + key)
	}
}

// TestCrashAfterAck kills a consumer process with SIGKILL after its Ack
// returned, in several rounds, and reopens the store. Acks are
// group-committed without waiting (README, "Delivery"), so an acked
// message may come back; the promise is that nothing is lost: every
// message the consumer never acked is delivered again, whole, once. The
// child says "acking" before each Ack and "acked" after it: a message it
// was acking when killed may be gone (its ack committed) or back.
// How many acked messages came back is reported as a figure. Petrel has no
// durable-ack call, so there is no ack that must never come back.
func TestCrashAfterAck(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	const perRound, rounds = 400, 4
	rng := crashRand(t)
	var acked, back int
	for round := range rounds {
		dir := t.TempDir()
		cfg := petrel.Config{Name: "crash", DataDir: dir, Logger: quiet}
		sent := sendCrashBatch(t, cfg, "acks", fmt.Sprintf("ack%d", round), perRound)
		// Kill somewhere in the middle: some acks reported, some not.
		killAt := perRound/4 + rng.IntN(perRound/2)
		reported := map[string]bool{}
		issued := map[string]bool{} // Ack called, reported or not
		runChild(t, "TestCrashAckChild", []string{envCrashDir + "=" + dir, envCrashAckQueue + "=acks"},
			func(line string, kill func()) {
				if k, ok := strings.CutPrefix(line, "acking "); ok {
					issued[k] = true
				}
				if k, ok := strings.CutPrefix(line, "acked "); ok {
					reported[k] = true
					if len(reported) == killAt {
						kill()
					}
				}
			})
		if len(reported) < killAt {
			t.Fatalf("round %d: %d acks reported, the kill was due at %d", round, len(reported), killAt)
		}
		got := readBack(t, cfg, "acks")
		lost, unexpected, came := 0, 0, 0
		for _, k := range sent {
			switch {
			case got.seen[k] > 0 && reported[k]:
				came++
			case got.seen[k] == 0 && !issued[k]:
				lost++
				got.examples = append(got.examples, "lost, never acked: "+k)
			}
		}
		for k := range got.seen {
			if !slices.Contains(sent, k) {
				unexpected++
			}
		}
		t.Logf("round %d: sent %d, acked before the kill %d, acked and back %d; lost %d, duplicated %d, unexpected %d, altered %d",
			round, len(sent), len(reported), came, lost, got.duplicated, unexpected, got.altered)
		if lost+got.duplicated+unexpected+got.altered != 0 {
			t.Fatalf("round %d: lost %d, duplicated %d, unexpected %d, altered %d; examples:\n%s",
				round, lost, got.duplicated, unexpected, got.altered, strings.Join(got.examples, "\n"))
		}
		acked += len(reported)
		back += came
	}
	t.Logf("acked-then-killed: %d acks reported over %d rounds, %d came back (%.1f%%), none lost",
		acked, rounds, back, 100*float64(back)/float64(acked))
}

// sendCrashBatch opens the node of cfg, sends count messages to addr from
// producer, waits for each, closes the node, and returns their keys.
func sendCrashBatch(t *testing.T, cfg petrel.Config, addr, producer string, count int) []string {
	t.Helper()
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := n.Producer()
	keys := make([]string, count)
	for i := range count {
		k := crashKey{producer: producer, seq: i}
		if err := p.Send(context.Background(), k.message(p, addr)); err != nil {
			t.Fatal(err)
		}
		keys[i] = k.String()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return keys
}

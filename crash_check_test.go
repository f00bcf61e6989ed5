package petrel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
)

// crashKey names one message of a crash test: the producer that sent it
// and its place in that producer's sequence. Everything else about the
// message derives from it, so that a checker can compare the whole message
// stored against the one sent, not only its key.
type crashKey struct {
	producer string
	seq      int
}

func (k crashKey) String() string { return k.producer + "/" + strconv.Itoa(k.seq) }

// parseCrashKey reads a key back from String, or from the first word of a
// body.
func parseCrashKey(s string) (crashKey, bool) {
	s, _, _ = strings.Cut(s, " ")
	p, seq, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(seq)
	return crashKey{producer: p, seq: n}, ok && err == nil && p != ""
}

// message is the message sent under k to dest, every field set from k.
func (k crashKey) message(p *petrel.Producer, dest string) *message.Message {
	m := p.CreateDataMessage(dest)
	k.fill(m)
	return m
}

// fill sets the fields a checker compares.
func (k crashKey) fill(m *message.Message) {
	m.Priority = uint8(k.seq % 10)
	m.Data = message.DataProps{DataType: "crash", Encoding: "text"}
	m.Properties = nil
	m.Properties.Set("producer", message.String(k.producer))
	m.Properties.Set("seq", message.Int64(int64(k.seq)))
	m.Properties.Set("odd", message.Bool(k.seq%2 == 1))
	// The key, then a padding of varying length made of the key: a body
	// cut short, or another message's body, does not compare equal.
	m.Body = []byte(k.String() + " " + strings.Repeat(k.String(), 1+k.seq%7))
}

// differs reports how d differs from the message sent under k to dest,
// or "" if it does not: body, properties and headers (destination, kind,
// priority, data properties).
func (k crashKey) differs(d *petrel.Delivery, dest string) string {
	var want message.Message
	k.fill(&want)
	var diff []string
	if d.Destination != dest {
		diff = append(diff, fmt.Sprintf("destination %q, want %q", d.Destination, dest))
	}
	if d.Kind != message.KindData {
		diff = append(diff, fmt.Sprintf("kind %v, want data", d.Kind))
	}
	if d.Priority != want.Priority {
		diff = append(diff, fmt.Sprintf("priority %d, want %d", d.Priority, want.Priority))
	}
	if d.Data != want.Data {
		diff = append(diff, fmt.Sprintf("data %+v, want %+v", d.Data, want.Data))
	}
	if !slices.Equal(d.Properties, want.Properties) {
		diff = append(diff, fmt.Sprintf("properties %v, want %v", d.Properties, want.Properties))
	}
	if !bytes.Equal(d.Body, want.Body) {
		diff = append(diff, fmt.Sprintf("body %q, want %q", d.Body, want.Body))
	}
	return strings.Join(diff, "; ")
}

// readResult is what readBack found.
type readResult struct {
	// seen counts each key's deliveries.
	seen                          map[string]int
	duplicated, altered, disorder int
	examples                      []string
}

func (r *readResult) example(format string, args ...any) {
	if len(r.examples) < 20 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

// readBack opens the node of cfg, reads and acks everything in the queue
// addr, and closes the node. It compares each message whole with the one
// sent under its key, and checks that each producer's messages of one
// priority come out in the order it sent them (the queue delivers the
// highest priority first, FIFO within one). It fails the test if the
// number read is not the queue's depth, or if the depth is not zero once
// all was acked.
func readBack(t *testing.T, cfg petrel.Config, addr string) readResult {
	t.Helper()
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := n.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := n.QueueStat(addr)
	r := readResult{seen: map[string]int{}}
	last := map[string]int{} // producer and priority -> last seq
	read := 0
	for ; ; read++ {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			t.Fatalf("poll %s after %d: %v", addr, read, err)
		}
		r.check(d, addr, last)
		if err := d.Ack(); err != nil {
			t.Fatalf("ack %q: %v", d.Body, err)
		}
	}
	if int64(read) != before.Depth {
		t.Errorf("read %d messages from %s, its depth was %d", read, addr, before.Depth)
	}
	petreltest.Eventually(t, addr+" empty once all was acked", func() bool {
		st, _ := n.QueueStat(addr)
		return st.Depth == 0 && st.InFlight == 0
	}, func() string { st, _ := n.QueueStat(addr); return fmt.Sprintf("%+v", st) })
	return r
}

// check records one delivery: its key, whether it is whole, and whether
// it came in its producer's order.
func (r *readResult) check(d *petrel.Delivery, addr string, last map[string]int) {
	k, ok := parseCrashKey(string(d.Body))
	if !ok {
		r.altered++
		r.example("unreadable body %q", d.Body)
		return
	}
	if r.seen[k.String()]++; r.seen[k.String()] == 2 {
		r.duplicated++
		r.example("duplicated: %s", k)
	}
	if diff := k.differs(d, addr); diff != "" {
		r.altered++
		r.example("altered: %s: %s", k, diff)
	}
	stream := fmt.Sprintf("%s priority %d", k.producer, d.Priority)
	if prev, ok := last[stream]; ok && k.seq <= prev {
		r.disorder++
		r.example("out of order: %s after seq %d of %s", k, prev, stream)
	}
	last[stream] = max(last[stream], k.seq)
}

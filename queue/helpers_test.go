package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a settable clock for leases, backoff and TTL.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openAt opens a store at path; it is closed at the end of the test.
func openAt(t testing.TB, path string, mod func(*Config)) *Store {
	t.Helper()
	cfg := Config{Path: path, Logger: quiet, SweepInterval: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openTemp(t testing.TB, mod func(*Config)) (*Store, string) {
	path := filepath.Join(t.TempDir(), "petrel.db")
	return openAt(t, path, mod), path
}

var origin = message.NodeID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

var nextID atomic.Uint64

func msg(prio uint8, body string) *message.Message {
	return &message.Message{
		ID: nextID.Add(1), Origin: origin, Destination: "q", Kind: message.KindData,
		Priority: prio, Body: []byte(body),
	}
}

func mustQueue(t testing.TB, s *Store, name string, k Kind) *Queue {
	t.Helper()
	q, err := s.Queue(context.Background(), name, k)
	if err != nil {
		t.Fatalf("queue %q: %v", name, err)
	}
	return q
}

func mustPut(t testing.TB, q *Queue, m *message.Message) {
	t.Helper()
	if err := q.Put(context.Background(), m, false); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// body polls one message and returns its body, or "" if none is ready.
func pollBody(t testing.TB, q *Queue) (string, *Delivery) {
	t.Helper()
	d, err := q.Poll()
	if errors.Is(err, ErrNoMessage) {
		return "", nil
	}
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	m, err := d.Message()
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return string(m.Body), d
}

// drain polls and acks everything ready, returning the bodies in order.
func drain(t testing.TB, q *Queue) []string {
	t.Helper()
	var out []string
	for {
		b, d := pollBody(t, q)
		if d == nil {
			return out
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
		out = append(out, b)
	}
}

// submitWait submits puts as one request and waits for its commit.
func submitWait(t testing.TB, s *Store, puts []Put) *Op {
	t.Helper()
	op, err := s.Submit(puts)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	return op
}

// settle waits until every request submitted so far has committed, by
// committing one more behind them.
func settle(t testing.TB, s *Store) {
	t.Helper()
	if err := s.SetMeta(context.Background(), "settle", []byte("x")); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

package petrel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// openInternal opens a node for the tests that reach below the exported
// API.
func openInternal(t *testing.T, mod func(*Config)) *Node {
	t.Helper()
	cfg := Config{Name: "plant-7", DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// A node stamps with its store's clock, not the wall clock: the timestamp
// and the id of a message it makes, or one built by hand, follow
// Config.Store.Now.
func TestNodeStampsWithItsClock(t *testing.T) {
	const ahead = 1000 * time.Hour
	n := openInternal(t, func(c *Config) {
		c.Store.Now = func() time.Time { return time.Now().Add(ahead) }
	})
	p := n.Producer()
	created := p.CreateDataMessage("stamps")
	byHand := &message.Message{Destination: "stamps", Kind: message.KindData, Priority: message.DefaultPriority}
	for _, m := range []*message.Message{created, byHand} {
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatalf("send: %v", err)
		}
		wall := time.Now()
		if m.Timestamp.Before(wall.Add(ahead / 2)) {
			t.Errorf("timestamp %v: want the node's clock, about %v", m.Timestamp, wall.Add(ahead))
		}
		if ms := int64(m.ID >> 20); ms < wall.Add(ahead/2).UnixMilli() {
			t.Errorf("id %d was issued at %v: want the node's clock", m.ID, time.UnixMilli(ms))
		}
		if m.Origin != n.id {
			t.Errorf("origin %v: want the node's id %v", m.Origin, n.id)
		}
	}
	if created.ID == byHand.ID {
		t.Errorf("both messages have id %d", created.ID)
	}
}

// putUndecodable stores bytes that are no message in q, then a message
// that is, and returns the good one's id.
func putUndecodable(t *testing.T, n *Node, q *queue.Queue) uint64 {
	t.Helper()
	bad := n.Producer().CreateDataMessage(q.Name())
	good := n.Producer().CreateDataMessage(q.Name())
	op, err := n.store.Submit([]queue.Put{
		{Queue: q, Msg: bad, Data: []byte("not a message")},
		{Queue: q, Msg: good},
	})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return good.ID
}

// A message that cannot be decoded goes to the dead-letter queue, with the
// reason, whether a Consumer (Poll or Receive) or the admin recv takes it;
// the next message is delivered.
func TestUndecodableMessageIsDeadLettered(t *testing.T) {
	ctx := context.Background()
	takes := map[string]func(*Node, *Consumer) (uint64, error){
		"poll": func(_ *Node, c *Consumer) (uint64, error) {
			d, err := c.Poll()
			if err != nil {
				return 0, err
			}
			return d.ID, d.Ack()
		},
		"receive": func(_ *Node, c *Consumer) (uint64, error) {
			d, err := c.Receive(ctx)
			if err != nil {
				return 0, err
			}
			return d.ID, d.Ack()
		},
		"admin recv": func(n *Node, c *Consumer) (uint64, error) {
			ts, _, err := n.admin.take(ctx, c.b.(*queueConsumer).q, 1, time.Second)
			if err != nil || len(ts) != 1 {
				return 0, errors.Join(err, errors.New("want one message"))
			}
			return ts[0].m.ID, ts[0].d.Ack()
		},
	}
	for name, take := range takes {
		t.Run(name, func(t *testing.T) {
			n := openInternal(t, nil)
			c, err := n.Consumer("undecodable")
			if err != nil {
				t.Fatal(err)
			}
			want := putUndecodable(t, n, c.b.(*queueConsumer).q)
			got, err := take(n, c)
			if err != nil || got != want {
				t.Fatalf("took %d, %v: want message %d", got, err, want)
			}
			if err := n.Sync(ctx); err != nil { // the move is group-committed without waiting
				t.Fatal(err)
			}
			dead, err := n.DeadLetters(ctx, "undecodable", 0)
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters %v, %v: want the undecodable one", dead, err)
			}
			if dead[0].Message != nil || !strings.Contains(dead[0].Reason, "decode") {
				t.Errorf("dead letter %+v: want undecodable, with the reason", dead[0])
			}
		})
	}
}

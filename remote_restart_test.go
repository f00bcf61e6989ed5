package petrel_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// nextDelivery is where a remote consumer's Receive waits.
const nextDelivery = "session.(*Session).NextDelivery"

// A node that restarts gracefully closes its sessions in order before its
// connections. Consumers waiting in Receive or Listen then saw their
// session end on a live connection, and took it for the node ending them
// for good; they subscribe again, as an idle one does
// (TestRemoteNodeRestart), a durable topic subscription too.
func TestRemoteNodeRestartWhileReceiving(t *testing.T) {
	dir := t.TempDir()
	cfg := petrel.Config{Name: "plant-7", DataDir: dir, Logger: quiet, Listen: "127.0.0.1:0",
		Topics: []petrel.TopicConfig{{Pattern: "plant.#"}}}
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = n.ListenAddr()
	c := nodes.Dial(t, n, petrel.DialOptions{})
	waiting := consumer(t, c, "orders")
	listened := consumer(t, c, "events")
	var handled atomic.Int64
	l, err := listened.Listen(func(_ context.Context, d *petrel.Delivery) error {
		if string(d.Body) == "after restart" {
			handled.Add(1)
		}
		return nil
	}, petrel.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	durable, err := c.Subscribe(ctx, "plant.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan error, 2)
	for _, cons := range []*petrel.Consumer{waiting, durable} {
		go func() {
			d, err := cons.Receive(ctx)
			if err == nil && string(d.Body) != "after restart" {
				err = errors.New("received " + string(d.Body))
			}
			if err == nil {
				err = d.Ack()
			}
			received <- err
		}()
	}
	petreltest.Eventually(t, "the Receives and the listener wait for a delivery", func() bool {
		return petreltest.GoroutinesIn(nextDelivery) == 3
	})
	n.Close()
	n, err = petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p := n.Producer()
	for _, addr := range []string{"orders", "events", "plant.temp"} {
		m := p.CreateDataMessage(addr)
		m.Body = []byte("after restart")
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-received; err != nil {
			t.Fatalf("a Receive waiting while the node restarted: %v", err)
		}
	}
	petreltest.Eventually(t, "the listener handles a message sent after the restart", func() bool {
		return handled.Load() == 1
	})
	c.Close()
}

// A consumer the node refuses when it subscribes again after the node
// ended its session ends for good, with the node's reason: here the
// restarted node has made its address a topic.
func TestRemoteNodeRestartRefusesConsumer(t *testing.T) {
	n, cfg := openRestartable(t)
	var err error
	c := nodes.Dial(t, n, petrel.DialOptions{})
	cons := consumer(t, c, "gone")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	received := make(chan error, 1)
	go func() {
		_, err := cons.Receive(ctx)
		received <- err
	}()
	petreltest.Eventually(t, "the Receive waits for a delivery", func() bool {
		return petreltest.GoroutinesIn(nextDelivery) == 1
	})
	n.Close()
	cfg.Topics = []petrel.TopicConfig{{Pattern: "gone"}}
	n, err = petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	err = <-received
	if !errors.Is(err, petrel.ErrRefused) || !errors.Is(err, petrel.ErrClosed) || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("Receive of a consumer the restarted node refuses: %v", err)
	}
	c.Close()
}

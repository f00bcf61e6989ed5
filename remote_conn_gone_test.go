package petrel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A remote consumer's connection that dies under it (cut, not closed)
// leaves nothing behind at the node: the sessions it carried end with it,
// the consumer's waiting for the next message included, and the node
// counts one connection again once the client has reconnected.
func TestRemoteConsumerConnectionCutFreesItsSessions(t *testing.T) {
	n := nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(withAdmin))
	p := petreltest.NewProxy(t, n.ListenAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := petrel.Dial(ctx, "tcp://"+p.Addr(), petrel.DialOptions{Name: "app", Logger: quiet,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := c.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	sendOne(t, n, "jobs", "first")
	d, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	// The consumer's session now waits at the node for the next message.
	p.Cut()
	sendOne(t, n, "jobs", "second")
	// "first" may come again: its ack may not have crossed before the cut.
	for {
		d, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after the cut: %v", err)
		}
		_ = d.Ack()
		if string(d.Body) == "second" {
			break
		}
	}
	var got float64
	petreltest.Eventually(t, "one connection left", func() bool {
		got = scrape(t, n)[`petrel_connections_open{state="authenticated"}`]
		return got == 1
	}, func() string { return fmt.Sprintf("%v connections open", got) })
}

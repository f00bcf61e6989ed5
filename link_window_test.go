package petrel_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestLinkWindowBoundsBytesInFlight sends large messages over a link whose
// window allows a thousand messages but only 64 KiB: the bytes in flight,
// sampled all along, never pass the bound and one message, and every
// message arrives whole.
func TestLinkWindowBoundsBytesInFlight(t *testing.T) {
	const (
		windowBytes = 64 << 10
		size        = 24 << 10
		total       = 120
	)
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		c.Link.WindowBytes = windowBytes
	}))

	// Sample the link's flight while the messages cross it.
	var peak int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for _, l := range a.Links() {
				peak = max(peak, l.InFlightBytes)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	p := a.Producer()
	var pending []*petrel.Pending
	for i := range total {
		m := p.CreateDataMessage("big@b")
		m.Body = bytes.Repeat([]byte{byte(i)}, size)
		pending = append(pending, p.SendAsync(m))
	}
	for _, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := b.Consumer("big")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range total {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(d.Body) != size || d.Body[0] != byte(i) {
			t.Fatalf("message %d: %d bytes starting %d", i, len(d.Body), d.Body[0])
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	// A message's encoding is its body and a header of well under 1 KiB.
	if bound := int64(windowBytes + size + 1024); peak > bound {
		t.Fatalf("%d bytes were in flight at once, past the bound %d (window_bytes %d and one message)", peak, bound, windowBytes)
	}
	petreltest.Eventually(t, "the flight empty", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].InFlightBytes == 0
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
}

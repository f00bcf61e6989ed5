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

// TestFileOverASlowLinkHasNoWholeTransferTimeout: a file that takes
// several times every configured timeout to cross a slow link still
// arrives whole, in one go, as long as it keeps moving (PITFALLS 7: no
// whole-transfer timeouts). Every link and file timeout is 1 s; the file
// takes about 5 s through a 1 MiB/s proxy.
func TestFileOverASlowLinkHasNoWholeTransferTimeout(t *testing.T) {
	const (
		rate    = 1 << 20 // bytes a second through the proxy
		size    = 5<<20 + 123
		timeout = time.Second // the longest timeout configured
	)
	short := func(c *petrel.Config) {
		c.Link.HandshakeTimeout = timeout
		c.Link.WriteTimeout = timeout
		c.Link.IdleTimeout = timeout
		c.Link.StallAfter = timeout
		// Small chunks and window: chunks and acks keep flowing, and no
		// heartbeat waits behind more than a quarter second of chunks.
		c.Files.ChunkSize = 32 << 10
		c.Files.Window = 8
		c.Files.SyncBytes = 512 << 10
		c.Files.AbandonAfter = timeout
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(short))
	proxy := petreltest.NewProxy(t, b.ListenAddr(), petreltest.Pace(rate, rate))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + proxy.Addr()}}
		short(c)
	}))

	src, sum := writeRandom(t, t.TempDir(), "big.bin", size)
	p := a.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	start := time.Now()
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receiveFile(t, b, "files", 60*time.Second)
	took := time.Since(start)
	links := func() string { return fmt.Sprintf("a's links: %+v", a.Links()) }

	if got := fileSum(t, d.File.ReceivedFilePath); got != sum {
		t.Fatalf("received SHA-256 %s, sent %s", got, sum)
	}
	// The precondition: the transfer outlasted every timeout several
	// times over, or the test proves nothing.
	if took < 3*timeout {
		t.Fatalf("the transfer took %v, not over 3× the %v timeouts: the proxy does not throttle", took, timeout)
	}
	// b delivers before a has read the final ack: wait for a to count
	// the file handed over.
	var l petrel.LinkStatus
	petreltest.Eventually(t, "a counting the file handed over", func() bool {
		ls := a.Links()
		if len(ls) != 1 {
			return false
		}
		l = ls[0]
		return l.Files.Done == 1 && len(l.Files.Active) == 0
	}, links)
	if l.Reconnects != 0 || l.LastError != "" || l.Files.Failed != 0 {
		t.Fatalf("a's link reconnected or failed during the transfer: %s", links())
	}
	// Sent once, from zero, not restarted: what a sent, and what the
	// proxy carried (chunks plus framing, the announce and heartbeats),
	// are the size and a little, not a resend on top of it.
	if l.Files.Wire != size {
		t.Fatalf("a sent %d content bytes for a %d-byte file: the transfer was cut and sent again, whole or in part", l.Files.Wire, size)
	}
	if carried := proxy.Forwarded(); carried < size || carried > size+size/50 {
		t.Fatalf("the proxy carried %d bytes toward b for a %d-byte file", carried, size)
	}
	t.Logf("%d bytes in %v (%.1f× the %v timeouts); proxy carried %d bytes toward b",
		size, took.Round(time.Millisecond), took.Seconds()/timeout.Seconds(), timeout, proxy.Forwarded())
}

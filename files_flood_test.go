package petrel_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// TestFileProgressesUnderPriorityFlood sends a priority-0 file from a
// to b while a producer keeps a backlog of priority-9 messages toward b
// for the whole test: a sustained flood, topped up so that the link's
// message window stays full with more priority-9 messages ready behind
// it, not a burst that drains. The file's received bytes at b must grow
// while the flood runs, and the file must be delivered, whole, before
// the flood stops (PITFALLS 6: strict priority must not starve a file).
//
// The flood goes to another address at b, so the file shares the
// connection, not its send queue, with it: its chunks move on a file
// session of their own. A file message sent to the very address of a
// sustained higher-priority flood waits in that send queue as any message
// of its priority does (strict priority, see README's Guarantees), and
// its chunks flow once it has started.
func TestFileProgressesUnderPriorityFlood(t *testing.T) {
	fileUnderFlood(t, "urgent")
}

// floodWindow is the link's message window in the flood test: small, so
// that the flood fills it and keeps a ready backlog behind it.
const floodWindow = 16

func fileUnderFlood(t *testing.T, floodAddr string) {
	// Small chunks and a small window: the transfer takes many round
	// trips, so that its progress can be sampled.
	files := petrel.FilesConfig{ChunkSize: 32 << 10, Window: 4, SyncBytes: 1 << 20}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Files = files }))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Files = files
		c.Link.Window = floodWindow
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	floodQueue := floodAddr + "@b"

	// b consumes both addresses, acking everything; file messages are
	// handed to fileCh.
	ctx, cancel := context.WithCancel(context.Background())
	var consumers sync.WaitGroup
	defer func() { cancel(); consumers.Wait() }()
	fileCh := make(chan *petrel.Delivery, 1)
	var floodGot atomic.Int64
	for _, addr := range distinct("files", floodAddr) {
		c, err := b.Consumer(addr)
		if err != nil {
			t.Fatal(err)
		}
		consumers.Go(func() {
			for {
				d, err := c.Receive(ctx)
				if err != nil {
					return
				}
				if err := d.Ack(); err != nil {
					t.Error(err)
					return
				}
				if d.Kind == message.KindFile {
					select {
					case fileCh <- d:
					case <-ctx.Done():
						return
					}
				} else {
					floodGot.Add(1)
				}
			}
		})
	}

	// The flood: top the send queue up to a backlog well past the window
	// whenever it falls under it, until stopFlood.
	const backlog = 64 * floodWindow
	floodCtx, stopFlood := context.WithCancel(context.Background())
	var flooder sync.WaitGroup
	defer func() { stopFlood(); flooder.Wait() }()
	var floodSent atomic.Int64
	flooder.Go(func() {
		for floodCtx.Err() == nil {
			if l, ok := linkStatusOf(a, floodQueue); ok && l.Depth >= backlog {
				time.Sleep(time.Millisecond)
				continue
			}
			var last *petrel.Pending
			for range 8 * floodWindow {
				m := p.CreateDataMessage(floodQueue)
				m.Priority = 9
				m.Body = []byte(strconv.FormatInt(floodSent.Add(1), 10))
				last = p.SendAsync(m)
			}
			if err := last.Wait(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	petreltest.Eventually(t, "the flood fills the window with a backlog behind it", func() bool {
		l, ok := linkStatusOf(a, floodQueue)
		return ok && l.Acked > 0 && l.InFlight >= floodWindow/2 && l.Depth > l.InFlight
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })

	// The file, priority 0, while the flood runs.
	const size = 8 << 20
	path, sum := writeRandom(t, t.TempDir(), "flooded.bin", size)
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = path
	m.Priority = 0
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	floodAtFile := floodGot.Load()

	// Sample the file's progress at b until it is delivered, bounded by
	// the test's patience, the flood running all along.
	var samples []int64
	var d *petrel.Delivery
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(petreltest.Patience)
wait:
	for {
		select {
		case d = <-fileCh:
			break wait
		case <-tick.C:
			for _, tr := range b.Transfers() {
				if tr.Filename == "flooded.bin" && (len(samples) == 0 || tr.Received != samples[len(samples)-1]) {
					samples = append(samples, tr.Received)
				}
			}
		case <-deadline:
			l, _ := linkStatusOf(a, "files@b")
			t.Fatalf("the file was not delivered within %v under the flood: received at b %v; a's file link %+v; b's transfers %+v; flood delivered %d",
				petreltest.Patience, samples, l, b.Transfers(), floodGot.Load())
		}
	}
	floodDuring := floodGot.Load() - floodAtFile
	if floodCtx.Err() != nil {
		t.Fatal("the flood stopped before the file was delivered")
	}
	fl, _ := linkStatusOf(a, floodQueue)
	stopFlood()
	flooder.Wait()

	if d.File.FileChecksum != sum || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("the delivered file differs: checksum %q", d.File.FileChecksum)
	}
	// The received bytes grew while the flood ran: several rising values
	// were seen below the size (a starved transfer shows one or none).
	grew := 0
	for i, s := range samples {
		if s < size && (i == 0 || s > samples[i-1]) {
			grew++
		}
	}
	if grew < 2 {
		t.Fatalf("the file's received bytes at b did not grow during the flood: samples %v", samples)
	}
	// The flood was live the whole time: priority-9 messages kept
	// arriving while the file moved.
	if floodDuring < floodWindow {
		t.Fatalf("only %d flood messages arrived while the file moved: the flood did not keep the link busy", floodDuring)
	}
	t.Logf("file of %d bytes delivered under the flood: %d progress samples, %d flood messages delivered meanwhile, %d sent in all, %d queued at the end",
		size, len(samples), floodDuring, floodSent.Load(), fl.Depth)
}

// linkStatusOf returns n's link for the send queue q.
func linkStatusOf(n *petrel.Node, q string) (petrel.LinkStatus, bool) {
	for _, l := range n.Links() {
		if l.Queue == q {
			return l, true
		}
	}
	return petrel.LinkStatus{}, false
}

func distinct(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

package petrel_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestFilesAndMessagesShareALink moves one large file, many small ones
// and ordinary messages over one link at the same time: everything
// arrives, once, whole.
func TestFilesAndMessagesShareALink(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	dir := t.TempDir()
	sums := map[string]string{}
	send := func(name string, size int) {
		path, sum := writeRandom(t, dir, name, size)
		sums[name] = sum
		m := p.CreateFileMessage("files@b")
		m.File.SendFilePath = path
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	send("large.bin", 32<<20)
	for i := range 30 {
		send(fmt.Sprintf("small-%02d.txt", i), 1000+i*100)
	}
	const msgs = 500
	for i := range msgs {
		m := p.CreateDataMessage("readings@b")
		m.Priority = uint8(i % 10)
		m.Body = []byte(strconv.Itoa(i))
		if err := p.SendAsync(m).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	_, seen := drainBodies(t, b, "readings", numbered(msgs), a)
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("message %s arrived %d times", k, n)
		}
	}
	for range len(sums) {
		d := receiveFile(t, b, "files", 60*time.Second)
		want, ok := sums[d.File.Filename]
		if !ok {
			t.Fatalf("unexpected or duplicate file %q", d.File.Filename)
		}
		if fileSum(t, d.File.ReceivedFilePath) != want {
			t.Fatalf("%s differs", d.File.Filename)
		}
		delete(sums, d.File.Filename)
	}
}

// BenchmarkPriorityLatencyDuringFileTransfer measures the latency of
// priority-9 messages, sent every 5ms over the link a file is crossing,
// from Send to the consumer at the other end. The file is
// PETREL_FAIR_MIB MiB (default 256; 1024 for the figure in the README):
//
//	PETREL_FAIR_MIB=1024 go test -run '^$' -bench PriorityLatency -benchtime 1x .
func BenchmarkPriorityLatencyDuringFileTransfer(b *testing.B) {
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("PETREL_FAIR_MIB")); err == nil && v > 0 {
		mib = v
	}
	var files petrel.FilesConfig
	if v, err := strconv.Atoi(os.Getenv("PETREL_FAIR_SYNC_KIB")); err == nil && v > 0 {
		files.SyncBytes = int64(v) << 10
	}
	if v, err := strconv.Atoi(os.Getenv("PETREL_FAIR_WINDOW")); err == nil && v > 0 {
		files.Window = v
	}
	for range b.N {
		recv := nodes.Open(b, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Files = files }))
		send := nodes.Open(b, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
			c.Files = files
			c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(recv)}}
		}))
		path, _ := writeRandom(b, b.TempDir(), "big.bin", mib<<20)
		p := send.Producer()
		m := p.CreateFileMessage("files@b")
		m.File.SendFilePath = path
		if err := p.Send(context.Background(), m); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		fileDone := make(chan time.Duration, 1)
		go func() {
			c, _ := recv.Consumer("files")
			d, err := c.Receive(context.Background())
			if err == nil {
				d.Ack()
			}
			fileDone <- time.Since(start)
		}()
		c, err := recv.Consumer("urgent")
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		sentAt := map[string]time.Time{}
		var lat []time.Duration
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				d, err := c.Receive(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(sentAt[string(d.Body)]))
				mu.Unlock()
				d.Ack()
			}
		})
		var took time.Duration
		tick := time.NewTicker(5 * time.Millisecond)
	loop:
		for i := 0; ; i++ {
			select {
			case took = <-fileDone:
				break loop
			case <-tick.C:
			}
			um := p.CreateCommandMessage("urgent@b")
			um.Priority = 9
			um.Body = []byte(strconv.Itoa(i))
			mu.Lock()
			sentAt[string(um.Body)] = time.Now()
			mu.Unlock()
			if err := p.Send(context.Background(), um); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		time.Sleep(200 * time.Millisecond) // the last messages arrive
		cancel()
		wg.Wait()
		mu.Lock()
		slices.Sort(lat)
		n := len(lat)
		mu.Unlock()
		if n == 0 {
			b.Fatal("no priority-9 message arrived")
		}
		q := func(f float64) float64 { return float64(lat[min(n-1, int(f*float64(n)))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(lat[n-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(n), "messages")
		b.ReportMetric(float64(mib)/took.Seconds(), "file-MiB/s")
	}
}

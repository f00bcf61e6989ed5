package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/receiver"
)

// TestAutoCreateCap: past max_auto_queues undeclared queues, a peer's
// message to a new undeclared address is refused for good (dead-lettered
// at the sender, with the reason) and nothing is created; declared
// addresses and queues that exist are unaffected.
func TestAutoCreateCap(t *testing.T) {
	b := openNode(t, "b", "127.0.0.1:0", func(c *petrel.Config) {
		c.MaxAutoQueues = 2
		withAdmin(c)
		c.Addresses = []petrel.AddressConfig{{Name: "declared", Role: address.RoleReceive}}
	})
	a := openNode(t, "a", "", func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tcp(b)}}
	})
	send := func(dest string) {
		t.Helper()
		m := a.Producer().CreateDataMessage(dest)
		m.Body = []byte(dest)
		if err := a.Producer().Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// Two undeclared queues fill the bound; wait for both to be made.
	for _, q := range []string{"q1", "q2"} {
		send(q + "@b")
		drainBodies(t, b, q, []string{q + "@b"}, a)
	}
	send("q3@b")
	dlq, err := a.Consumer("q3.dlq")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := dlq.Receive(ctx)
	if err != nil {
		t.Fatalf("a message past the cap was not refused: %v; links %+v", err, a.Links())
	}
	if !strings.Contains(d.Reason, "max_auto_queues") {
		t.Fatalf("refusal reason %q does not name max_auto_queues", d.Reason)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.QueueStat("q3"); ok {
		t.Fatal("b created q3 past the cap")
	}
	if got := scrape(t, b)["petrel_auto_create_refused_total"]; got < 1 {
		t.Errorf("petrel_auto_create_refused_total = %v after a refusal", got)
	}
	// Declared addresses and existing queues still take messages.
	send("declared@b")
	send("q1@b")
	drainBodies(t, b, "declared", []string{"declared@b"}, a)
	drainBodies(t, b, "q1", []string{"q1@b"}, a)
	// The node's own producer shares the cap.
	m := b.Producer().CreateDataMessage("q4")
	if err := b.Producer().Send(context.Background(), m); !errors.Is(err, petrel.ErrTooManyQueues) {
		t.Fatalf("local send to a new address past the cap: %v, want ErrTooManyQueues", err)
	}
}

// TestSpoolQuotaPausesThenResumes: b's spool quota holds one file and a
// half. A transfer of file one, begun before a restart, sits in b's spool;
// file two, announced then, does not fit beside it and pauses with "spool
// quota". Once file one is sent, resumes and leaves the spool, file two
// completes too: paused, never lost.
func TestSpoolQuotaPausesThenResumes(t *testing.T) {
	const size = 4 << 20
	addrB := freeAddr(t)
	a := openNode(t, "a", "", func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addrB}}
	})
	src := t.TempDir()
	path1, sum1 := writeRandom(t, src, "one.bin", size)
	path2, sum2 := writeRandom(t, src, "two.bin", size)
	m1 := a.Producer().CreateFileMessage("files@b")
	m1.File.SendFilePath = path1
	m2 := a.Producer().CreateFileMessage("files@b")
	m2.File.SendFilePath = path2

	// File one's first MiB, left in b's spool by an earlier run.
	spoolDir := filepath.Join(t.TempDir(), "spool")
	sp, err := filetransfer.OpenSpool(spoolDir, filetransfer.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	in, err := sp.Begin(receiver.TransferID(m1.Origin, m1.ID), filetransfer.Info{Filename: "one.bin", Size: size, SHA256: sum1})
	if err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(path1)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Write(0, head[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	in.Close()

	b := openNode(t, "b", addrB, func(c *petrel.Config) {
		c.Files = petrel.FilesConfig{Spool: spoolDir, MaxSpoolBytes: size + size/2, MaxSpoolBytesPerPeer: size + size/2}
		withAdmin(c)
	})
	if err := a.Producer().Send(t.Context(), m2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		for _, tr := range b.Transfers() {
			if tr.Filename == "two.bin" && tr.State == "paused" && strings.Contains(tr.Error, "spool quota") {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("file two never paused for the quota: %+v", b.Transfers()) })

	if err := a.Producer().Send(t.Context(), m1); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range 2 {
		d := receiveFile(t, b, "files", 60*time.Second)
		got[d.File.Filename] = fileSum(t, d.File.ReceivedFilePath)
		d.Ack()
	}
	if got["one.bin"] != sum1 || got["two.bin"] != sum2 {
		t.Fatalf("received %v, want one.bin %s and two.bin %s", got, sum1, sum2)
	}
	// The notice commits just before the transfer leaves the spool.
	var m map[string]float64
	waitFor(t, 10*time.Second, func() bool {
		m = scrape(t, b)
		return len(b.Transfers()) == 0 && m["petrel_spool_used_bytes"] == 0
	}, func() string {
		return fmt.Sprintf("transfers left: %+v; spool used %v", b.Transfers(), m["petrel_spool_used_bytes"])
	})
	if m[`petrel_spool_quota_total{outcome="paused"}`] < 1 || m[`petrel_spool_quota_bytes{scope="total"}`] != size+size/2 {
		t.Errorf("spool metrics: paused %v, quota %v", m[`petrel_spool_quota_total{outcome="paused"}`], m[`petrel_spool_quota_bytes{scope="total"}`])
	}
}

// TestSpoolQuotaPausedTransfersBounded: a peer announces more files than
// b lists paused for one peer (64), none of which fits b's spool quota now.
// b lists at most 64 of them, drops the entries paused longest ago and
// counts them; once the peer's link closes, b lists none, and the gauge of
// the files it receives is back to 0. Before, b kept one entry per file
// announced, connection gone or not.
func TestSpoolQuotaPausedTransfersBounded(t *testing.T) {
	const (
		perPeer = 64 // the receiver's maxPausedPerPeer
		files   = perPeer + 16
		quota   = 64 << 10
	)
	addrB := freeAddr(t)
	a := nodes.Open(t, nodes.Name("a"), nodes.LeasesMayRemain(), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addrB}}
		c.Files.Concurrency = files // every file announced at once
	}))
	// Another transfer's partial file, left in b's spool by an earlier
	// run, takes the whole quota until its sender resumes it.
	src := t.TempDir()
	_, blockerSum := writeRandom(t, src, "blocker.bin", quota)
	spoolDir := filepath.Join(t.TempDir(), "spool")
	sp, err := filetransfer.OpenSpool(spoolDir, filetransfer.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	in, err := sp.Begin("blocker", filetransfer.Info{Filename: "blocker.bin", Size: quota, SHA256: blockerSum})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Write(0, make([]byte, 1<<10)); err != nil {
		t.Fatal(err)
	}
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	in.Close()
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(addrB), nodes.With(func(c *petrel.Config) {
		c.Files = petrel.FilesConfig{Spool: spoolDir, MaxSpoolBytes: quota, MaxSpoolBytesPerPeer: quota}
		withAdmin(c)
	}))

	for i := range files {
		path, _ := writeRandom(t, src, fmt.Sprintf("f%02d.bin", i), 1<<10)
		m := a.Producer().CreateFileMessage("files@b")
		m.File.SendFilePath = path
		if err := a.Producer().Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	const receiving = `petrel_file_transfers_active{direction="receiving"}`
	var most int
	var m map[string]float64
	var listed []petrel.TransferStatus
	named := map[string]bool{} // the files b listed paused, at one time or another
	petreltest.Eventually(t, "b dropping the paused entries past its bound", func() bool {
		listed, m = b.Transfers(), scrape(t, b)
		most = max(most, len(listed), int(m[receiving]))
		for _, tr := range listed {
			if tr.State == "paused" && strings.Contains(tr.Error, "spool quota") {
				named[tr.Filename] = true
			}
		}
		return len(named) == files && m["petrel_file_transfers_evicted_total"] >= files-perPeer
	}, func() string {
		return fmt.Sprintf("%d files seen paused, %v evicted; %d listed, the first %+v", len(named), m["petrel_file_transfers_evicted_total"], len(listed), listed[:min(len(listed), 2)])
	})
	t.Logf("%d files announced; b listed at most %d, evicted %v", files, most, m["petrel_file_transfers_evicted_total"])
	if most > perPeer {
		t.Fatalf("b listed up to %d transfers of one peer, want at most %d", most, perPeer)
	}
	// The link closes: nothing on it can resume a file any more.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "b listing nothing once the link closed", func() bool {
		listed, m = b.Transfers(), scrape(t, b)
		return len(listed) == 0 && m[receiving] == 0
	}, func() string {
		return fmt.Sprintf("gauge %v; %d listed, the first %+v", m[receiving], len(listed), listed[:min(len(listed), 2)])
	})
}

// TestConnectionBoundsMetrics: a connection past the per-IP handshake
// bound is closed at once, and the metrics count it.
func TestConnectionBoundsMetrics(t *testing.T) {
	b := openNode(t, "b", "127.0.0.1:0", func(c *petrel.Config) {
		c.Link.MaxHandshakesPerIP = 1
		withAdmin(c)
	})
	var conns []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", b.ListenAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns = append(conns, nc)
	}
	// The first gets the node's Hello; the second is closed unread.
	conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	conns[1].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conns[1].Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("second connection from one IP read %d bytes, %v; want it closed", n, err)
	}
	m := scrape(t, b)
	if got := m[`petrel_connections_rejected_total{reason="handshakes_per_ip"}`]; got != 1 {
		t.Errorf("rejected per IP = %v, want 1", got)
	}
	if got := m[`petrel_connections_open{state="handshaking"}`]; got != 1 {
		t.Errorf("handshaking = %v, want 1", got)
	}
	for _, series := range []string{"petrel_receiver_buffered_bytes", "petrel_receiver_read_pauses_total", "petrel_discovery_nodes"} {
		if _, ok := m[series]; !ok {
			t.Errorf("no %s", series)
		}
	}
}

// TestPrefetchTotalMetrics: a node's queues hold no more ready in memory
// than store.prefetch_total_bytes, the metrics show the bound and what is
// held, and every message still comes out, in order, the rest read back
// from disk.
func TestPrefetchTotalMetrics(t *testing.T) {
	const limit = 4096
	n := open(t, func(c *petrel.Config) {
		withAdmin(c)
		c.Store.PrefetchTotalBytes = limit
	})
	p := n.Producer()
	const count = 300
	var sent []string
	for i := range count {
		m := p.CreateDataMessage("prefetched")
		sent = append(sent, fmt.Sprintf("m%04d", i))
		m.Body = []byte(sent[i])
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	got := scrape(t, n)
	if v := got["petrel_store_prefetch_limit_bytes"]; v != limit {
		t.Errorf("petrel_store_prefetch_limit_bytes = %v, want %d", v, limit)
	}
	if v := got["petrel_store_prefetch_bytes"]; v <= 0 || v > limit {
		t.Errorf("petrel_store_prefetch_bytes = %v with %d messages queued, want within (0, %d]", v, count, limit)
	}
	c, err := n.Consumer("prefetched")
	if err != nil {
		t.Fatal(err)
	}
	expectBodies(t, c, "past the prefetch bound", sent...)
	if v := scrape(t, n)["petrel_store_prefetch_bytes"]; v != 0 {
		t.Errorf("petrel_store_prefetch_bytes = %v with every message consumed, want 0", v)
	}
}

package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// The checksum follows: a file for another node is stored before Send
// hashes it, its transfer runs meanwhile, and its checksum follows its
// last byte. These tests hold Send's hash back with a hook (SetHashHook)
// until the transfer stands where they want it, so what they check does
// not depend on which of the hash and the transfer is faster.

// hashGate holds the hashes of a node's Sends: each Send, once its
// message is stored, reports the message id on stored and waits for
// release (closed, or one value per Send).
type hashGate struct {
	stored  chan uint64
	release chan struct{}
}

func holdHashes(n *petrel.Node) *hashGate {
	g := &hashGate{stored: make(chan uint64, 4), release: make(chan struct{}, 4)}
	petrel.SetHashHook(n, func(m *message.Message) {
		g.stored <- m.ID
		<-g.release
	})
	return g
}

// sendHeld starts Send of the file at path to dest in its own goroutine
// and returns the message (its id is set once stored; read it only after
// wait) and wait, which returns Send's error; the test must call it.
func sendHeld(t *testing.T, n *petrel.Node, g *hashGate, ctx context.Context, dest, path string, mods ...func(*message.Message)) (m *message.Message, wait func() error) {
	t.Helper()
	m = n.Producer().CreateFileMessage(dest)
	m.File.SendFilePath = path
	for _, mod := range mods {
		mod(m)
	}
	done := make(chan error, 1)
	go func() { done <- n.Producer().Send(ctx, m) }()
	select {
	case <-g.stored:
	case err := <-done:
		t.Fatalf("Send returned before it hashed the file: %v", err)
	case <-time.After(petreltest.Patience):
		t.Fatal("Send never stored the file message")
	}
	return m, func() error { return <-done }
}

// transferOf returns n's receiving transfer, if it has one.
func transferOf(n *petrel.Node) (petrel.TransferStatus, bool) {
	ts := n.Transfers()
	if len(ts) != 1 {
		return petrel.TransferStatus{}, false
	}
	return ts[0], true
}

// allBytesAt waits until n has every byte of the size-byte file but has
// not taken it (its checksum has not come): durable below the size.
func allBytesAt(t *testing.T, n *petrel.Node, size int64) {
	t.Helper()
	petreltest.Eventually(t, "every byte at "+n.Name(), func() bool {
		tr, ok := transferOf(n)
		return ok && tr.Received == size && tr.State == filetransfer.StateReceiving
	}, func() string { return fmt.Sprintf("transfers %+v", n.Transfers()) })
	tr, _ := transferOf(n)
	if tr.Offset >= size {
		t.Fatalf("%s holds the file durably at %d of %d before its checksum came", n.Name(), tr.Offset, size)
	}
	if got := n.ReceiverStats().FilesTaken; got != 0 {
		t.Fatalf("%s took %d files before the checksum came", n.Name(), got)
	}
}

// deliveredWith waits up to within for the file message at b's "files"
// address and checks that it carries sum and its content has it.
func deliveredWith(t *testing.T, b *petrel.Node, sum string, within time.Duration) {
	t.Helper()
	d := receiveFile(t, b, "files", within)
	if d.File.FileChecksum != sum || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("delivered checksum %q / content differ from %s", d.File.FileChecksum, sum)
	}
}

// smallChunks makes a file of a few MiB many chunks and checkpoints, so
// that a test can cut a transfer in its middle.
var smallChunks = petrel.FilesConfig{ChunkSize: 64 << 10, Window: 8, SyncBytes: 1 << 20}

func withSmallChunks(c *petrel.Config) { c.Files = smallChunks }

func oneHop(t *testing.T, mod func(*petrel.Config)) (a, b *petrel.Node) {
	t.Helper()
	b = nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(mod))
	a = nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		if mod != nil {
			mod(c)
		}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	return a, b
}

// (a) The transfer runs while Send hashes: every byte is at the next hop
// before Send has the checksum; then the file is delivered with it.
func TestFileChecksumFollowsOneHop(t *testing.T) {
	a, b := oneHop(t, nil)
	const size = 3<<20 + 5
	src, sum := writeRandom(t, t.TempDir(), "follows.bin", size)
	g := holdHashes(a)
	m, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, b, size)
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if m.File.FileChecksum != sum || m.File.Filesize != size {
		t.Fatalf("Send returned with checksum %q and size %d; want %s, %d", m.File.FileChecksum, m.File.Filesize, sum, size)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	if d.File.FileChecksum != sum {
		t.Fatalf("delivered with checksum %q, want %s", d.File.FileChecksum, sum)
	}
	if got := fileSum(t, d.File.ReceivedFilePath); got != sum {
		t.Fatalf("delivered content has SHA-256 %s, sent %s", got, sum)
	}
	if n := petrel.FilesAnnounced(b); n != 1 {
		t.Fatalf("%d file sessions for one uncut transfer", n)
	}
	petreltest.Eventually(t, "a forgetting the checksum", func() bool { return petrel.PendingChecksums(a) == 0 })
}

// (b) A link cut in the middle of the content, while Send still hashes:
// the transfer resumes and the file arrives whole.
func TestFileChecksumFollowsCutMidTransfer(t *testing.T) {
	a, b := oneHop(t, withSmallChunks)
	const size = 64 << 20
	src, sum := writeRandom(t, t.TempDir(), "cut.bin", size)
	g := holdHashes(a)
	_, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	var atCut petrel.TransferStatus
	petreltest.Eventually(t, "part of the file durable at b", func() bool {
		tr, ok := transferOf(b)
		atCut = tr
		return ok && tr.Offset >= 4<<20
	}, func() string { return fmt.Sprintf("transfers %+v", b.Transfers()) })
	a.CutLink("b")
	if atCut.Received >= size {
		t.Fatalf("every byte had arrived before the cut (%+v): the cut is not mid-transfer", atCut)
	}
	petreltest.Eventually(t, "a second file session", func() bool { return petrel.FilesAnnounced(b) >= 2 })
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	deliveredWith(t, b, sum, 60*time.Second)
}

// (c) A link cut after the last byte and before the checksum: the next
// session resumes below the size (custody never passes early), the link
// waits for the checksum again, and the file then arrives.
func TestFileChecksumFollowsCutBeforeChecksum(t *testing.T) {
	// Syncs every 1 MiB, and the file is a whole number of MiB: its last
	// chunk completes a sync interval, where a checkpoint would record the
	// whole size were the checksum not pending.
	a, b := oneHop(t, withSmallChunks)
	const size = 4 << 20
	src, sum := writeRandom(t, t.TempDir(), "late.bin", size)
	g := holdHashes(a)
	m, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, b, size)
	a.CutLink("b")
	// The sender sees its session end even while it waits for the hash,
	// and resumes on a new one, which gets every byte again and waits.
	petreltest.Eventually(t, "a second file session", func() bool { return petrel.FilesAnnounced(b) >= 2 })
	allBytesAt(t, b, size)
	if st, _ := petrel.FileState(a, m.ID); st == filetransfer.StateHandedOver {
		t.Fatal("a handed the file over before its checksum was sent")
	}
	if qs, _ := b.QueueStat("files"); qs.Depth != 0 {
		t.Fatalf("b committed %d messages before the checksum came", qs.Depth)
	}
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	deliveredWith(t, b, sum, 30*time.Second)
	petreltest.Eventually(t, "a handing the file over", func() bool {
		st, _ := petrel.FileState(a, m.ID)
		return st == filetransfer.StateHandedOver
	})
}

// (d) A relay forwards a file whose checksum follows while it still
// receives it: the destination gets bytes before the origin has the
// checksum, and the relay sends, after the last byte, the checksum it
// verified.
func TestFileChecksumFollowsThroughEarlyRelay(t *testing.T) {
	a, c, b := relayTrio(t, func(cfg *petrel.Config) {
		cfg.Files = smallChunks
	})
	const size = 8<<20 + 17
	src, sum := writeRandom(t, t.TempDir(), "relayed.bin", size)
	g := holdHashes(a)
	_, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, c, size)
	petreltest.Eventually(t, "the relay forwarding early", func() bool {
		tr, ok := transferOf(b)
		return ok && tr.Received > 0
	}, func() string { return fmt.Sprintf("b transfers %+v", b.Transfers()) })
	if tr, _ := transferOf(b); tr.Received >= size {
		t.Fatalf("b got every byte (%+v) before the relay could verify the file", tr)
	}
	if got := b.ReceiverStats().FilesTaken; got != 0 {
		t.Fatalf("b took %d files before any checksum existed", got)
	}
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	deliveredWith(t, b, sum, 30*time.Second)
	early := int64(0)
	for _, l := range c.Links() {
		early += l.Files.Early
	}
	if early == 0 {
		t.Fatal("the relay never forwarded early")
	}
	if n := petrel.FilesAnnounced(b); n < 1 {
		t.Fatalf("FilesAnnounced at b = %d", n)
	}
}

// nothingDelivered checks that the file message id from a ended failed,
// with why, and that b holds nothing of it: no message, no file, no
// partial file.
func nothingDelivered(t *testing.T, a, b *petrel.Node, id uint64, why string) {
	t.Helper()
	petreltest.Eventually(t, "a giving the file up", func() bool {
		st, _ := petrel.FileState(a, id)
		return st == filetransfer.StateFailed
	}, func() string { st, e := petrel.FileState(a, id); return fmt.Sprintf("%s %s", st, e) })
	if _, e := petrel.FileState(a, id); !strings.Contains(e, why) {
		t.Fatalf("the file failed with %q; want it to say %q", e, why)
	}
	if qs, _ := b.QueueStat("files"); qs.Depth != 0 || qs.Enqueued != 0 {
		t.Fatalf("b committed a file message: %+v", qs)
	}
	if got := b.ReceiverStats().FilesTaken; got != 0 {
		t.Fatalf("b took %d files", got)
	}
	ents, _ := os.ReadDir(filepath.Join(b.DataDir(), "received", "files"))
	if len(ents) != 0 {
		t.Fatalf("b's received folder holds %d entries", len(ents))
	}
	petreltest.Eventually(t, "b dropping the partial file", func() bool { return len(spoolEntries(b)) == 0 },
		func() string { return fmt.Sprint(spoolEntries(b)) })
	petreltest.Eventually(t, "a forgetting the checksum", func() bool { return petrel.PendingChecksums(a) == 0 })
}

// (e) The file grows while Send hashes it: Send fails with
// ErrSourceChanged, and the transfer that had begun is given up: nothing
// reaches the destination.
func TestFileChecksumFollowsHashFailsOnChange(t *testing.T) {
	a, b := oneHop(t, nil)
	const size = 2 << 20
	src, _ := writeRandom(t, t.TempDir(), "growing.bin", size)
	g := holdHashes(a)
	m, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, b, size)
	changeWhileHashed(t, src, g, wait)
	nothingDelivered(t, a, b, m.ID, "changed")
}

// (e) Send's context ends while it hashes: the file itself is fine, but
// Send returns the error, so the transfer already running must be given
// up: the origin's word on the checksum never came.
func TestFileChecksumFollowsHashFailsOnContext(t *testing.T) {
	a, b := oneHop(t, nil)
	const size = 2 << 20
	m := sendCancelled(t, a, "cancelled.bin", size, func() { allBytesAt(t, b, size) })
	nothingDelivered(t, a, b, m.ID, "checksum could not be computed")
}

// (e) Send's context ends while the transfer is in its middle: the
// sender stops at its next ack, not after the last chunk, so that a file
// given up does not cross the link for nothing.
func TestFileChecksumFollowsHashFailsMidTransfer(t *testing.T) {
	a, b := oneHop(t, withSmallChunks)
	const size = 64 << 20 // the transfer cannot end in the few ms the failure takes to reach the sender
	m := sendCancelled(t, a, "large.bin", size, func() {
		petreltest.Eventually(t, "the transfer under way at b", func() bool {
			tr, ok := transferOf(b)
			return ok && tr.Received > 0
		})
	})
	nothingDelivered(t, a, b, m.ID, "checksum could not be computed")
	if got := b.ReceiverStats().FileBytes; got >= size {
		t.Fatalf("b received all %d bytes of a file given up in its middle; the sender should have stopped at its next ack", got)
	}
}

// sendCancelled sends a new file of size bytes called name to files@b
// from a, with a context that ends while Send hashes it: once the message
// is stored and whileHeld (if set) returned. It returns the message:
// stored, and given up by Send.
func sendCancelled(t *testing.T, a *petrel.Node, name string, size int, whileHeld func(), mods ...func(*message.Message)) *message.Message {
	t.Helper()
	src, _ := writeRandom(t, t.TempDir(), name, size)
	g := holdHashes(a)
	ctx, cancel := context.WithCancel(context.Background())
	m, wait := sendHeld(t, a, g, ctx, "files@b", src, mods...)
	if whileHeld != nil {
		whileHeld()
	}
	cancel()
	close(g.release)
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send whose context ended while it hashed = %v; want context.Canceled", err)
	}
	return m
}

// (e) The hash fails before the sender picks the message up (the link is
// not up yet): once it is, the message is given up without being
// announced.
func TestFileChecksumFollowsHashFailsBeforeLinkUp(t *testing.T) {
	addr := freeAddr(t) // b listens there only after Send failed
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addr}}
	}))
	m := sendCancelled(t, a, "early.bin", 1<<20, nil)
	if st, _ := petrel.FileState(a, m.ID); st == filetransfer.StateFailed {
		t.Fatal("the file failed before its link came up: the test checks nothing")
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(addr))
	nothingDelivered(t, a, b, m.ID, "checksum could not be computed")
	if n := petrel.FilesAnnounced(b); n != 0 {
		t.Fatalf("b saw %d announcements of a file given up before its link came up", n)
	}
}

// (e) The hash fails while the link is down, and the origin restarts
// before its link comes up: the restarted node still gives the file up
// (the failure was recorded in its store), rather than hashing the file
// itself and delivering a file whose Send failed. The record goes once
// the file is given up.
func TestFileChecksumFollowsHashFailsThenRestart(t *testing.T) {
	addr := freeAddr(t) // b listens there only after a restarted
	dir := t.TempDir()
	cfg := func(c *petrel.Config) {
		c.DataDir = dir
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addr}}
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	m := sendCancelled(t, a, "restart-failed.bin", 1<<20, nil)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	if got := petrel.PendingChecksums(a2); got != 1 {
		t.Fatalf("the restarted node holds %d failed hashes; want the one recorded", got)
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(addr))
	nothingDelivered(t, a2, b, m.ID, "context canceled")
	if n := petrel.FilesAnnounced(b); n != 0 {
		t.Fatalf("b saw %d announcements of a file whose Send failed", n)
	}
	noHashRecords(t, a2, "after the file was given up")
}

// (e) As above, but the file message's TTL runs out while the origin is
// down: the record of its failed hash goes at the next start, with the
// message, instead of staying for good.
func TestFileChecksumFollowsGivenUpRecordExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	dir := t.TempDir()
	cfg := func(c *petrel.Config) {
		c.DataDir = dir
		c.Store.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + freeAddr(t)}} // never up
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	sendCancelled(t, a, "expiring.bin", 1<<20, nil, func(m *message.Message) { m.TTL = time.Minute })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(2 * time.Minute))
	a2 := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	noHashRecords(t, a2, "after the file message expired")
}

// (e) An operator purges the send queue that holds a file message whose
// hash failed: no sender will settle it, so its record goes with it, and
// the restarted node holds nothing.
func TestFileChecksumFollowsGivenUpPurged(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *petrel.Config) {
		c.DataDir = dir
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + freeAddr(t)}} // never up
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	sendCancelled(t, a, "purged.bin", 1<<20, nil)
	p := a.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("files@b")); err != nil {
		t.Fatal(err)
	}
	if got := petrel.PendingChecksums(a); got != 1 {
		t.Fatalf("%d pending checksums before the purge; want the failed one", got)
	}
	n, err := a.Purge(context.Background(), "files@b")
	if err != nil || n != 2 {
		t.Fatalf("Purge(files@b) = %d, %v; want the file message and the data message", n, err)
	}
	noHashRecords(t, a, "after the purge")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	noHashRecords(t, a2, "after the restart that followed the purge")
}

// noHashRecords checks that n keeps no record of a file's hash, failed or
// pending: none in memory, none in its store.
func noHashRecords(t *testing.T, n *petrel.Node, when string) {
	t.Helper()
	if got := petrel.PendingChecksums(n); got != 0 {
		t.Fatalf("%d pending checksums %s", got, when)
	}
	keys, _, err := n.Store().MetaPrefix(context.Background(), "file-given-up:")
	if err != nil || len(keys) != 0 {
		t.Fatalf("records of failed hashes %s: %v %v", when, keys, err)
	}
}

// A file message the store refuses (it is full) was never stored: Send
// fails, and neither its pending checksum nor a record of it stays.
func TestFileChecksumFollowsStoreFull(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Store.MaxMessages = 1
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + freeAddr(t)}} // down: what a sends stays
	}))
	p := a.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("other@b")); err != nil {
		t.Fatal(err) // 1 of 1
	}
	src, _ := writeRandom(t, t.TempDir(), "full.bin", 1<<20)
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := p.Send(context.Background(), m); !errors.Is(err, petrel.ErrStoreFull) {
		t.Fatalf("Send of a file into a full store = %v; want ErrStoreFull", err)
	}
	noHashRecords(t, a, "after a file Send the store refused")
}

// (g) The origin restarts between Send and the end of the transfer: the
// restarted node has no record of Send's hash, so its sender hashes the
// file itself and sends that checksum.
func TestFileChecksumFollowsOriginRestart(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	dir := t.TempDir()
	cfg := func(c *petrel.Config) {
		c.DataDir = dir
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.LeasesMayRemain(), nodes.With(cfg))
	const size = 3 << 20
	src, sum := writeRandom(t, t.TempDir(), "restart.bin", size)
	g := holdHashes(a)
	_, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, b, size)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	// The first node is closed: whatever Send then returns, the message
	// was stored, and the restarted node must carry it through.
	wait()
	a2 := nodes.Open(t, nodes.Name("a"), nodes.With(cfg))
	if petrel.PendingChecksums(a2) != 0 {
		t.Fatal("a restarted node holds checksums from before")
	}
	deliveredWith(t, b, sum, 30*time.Second)
	if n := petrel.FilesAnnounced(b); n < 2 {
		t.Fatalf("FilesAnnounced at b = %d; the restarted node must have resumed on a new session", n)
	}
}

// refusePending refuses, on links, a file message without its checksum,
// as a next hop older than the checksum that follows does.
type refusePending struct {
	petrel.NopInterceptor
	refused chan struct{}
}

func (r *refusePending) OnPublish(_ context.Context, m *message.Message, from petrel.ConnInfo) error {
	if m.Kind == message.KindFile && from.Path == petrel.PathLink && m.File.FileChecksum == "" {
		select {
		case r.refused <- struct{}{}:
		default:
		}
		return errors.New("bad file announcement: no checksum")
	}
	return nil
}

// A next hop that refuses a file announced before its checksum (an older
// node) gets it announced again with the checksum, and takes it.
func TestFileChecksumFollowsRefusedThenAnnouncedWithIt(t *testing.T) {
	ic := &refusePending{refused: make(chan struct{}, 1)}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Interceptors = []petrel.Interceptor{ic}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	const size = 1<<20 + 3
	src, sum := writeRandom(t, t.TempDir(), "older.bin", size)
	g := holdHashes(a)
	_, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	select {
	case <-ic.refused:
	case <-time.After(petreltest.Patience):
		t.Fatal("b never saw the announcement without its checksum")
	}
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	deliveredWith(t, b, sum, 30*time.Second)
}

// With a file session window of 1 there is no room for the checksum
// beside the last chunk: the sender waits for the checksum and announces
// the file with it.
func TestFileChecksumFollowsWindowOfOne(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Link.Window = 1
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		c.Files = petrel.FilesConfig{ChunkSize: 64 << 10}
	}))
	const size = 1<<20 + 9
	src, sum := writeRandom(t, t.TempDir(), "narrow.bin", size)
	g := holdHashes(a)
	_, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	close(g.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	deliveredWith(t, b, sum, 30*time.Second)
	if n := petrel.FilesAnnounced(b); n != 1 {
		t.Fatalf("%d file sessions; want the one announced with its checksum", n)
	}
}

// The origin gives a file up while the relay forwards it early (it
// changed while hashed): the relay aborts its part and passes the abort
// on, so the node after it drops its partial file at once, instead of
// holding it, and its spool quota, until abandon_after.
func TestFileGivenUpAtOriginIsDroppedAfterTheRelay(t *testing.T) {
	a, c, b := relayTrio(t, func(cfg *petrel.Config) {
		cfg.Files = smallChunks
	})
	const size = 8 << 20
	src, _ := writeRandom(t, t.TempDir(), "gone.bin", size)
	g := holdHashes(a)
	m, wait := sendHeld(t, a, g, context.Background(), "files@b", src)
	allBytesAt(t, c, size)
	petreltest.Eventually(t, "the relay forwarding early", func() bool {
		tr, ok := transferOf(b)
		return ok && tr.Received > 0
	}, func() string { return fmt.Sprintf("b transfers %+v", b.Transfers()) })
	changeWhileHashed(t, src, g, wait)
	nothingDelivered(t, a, b, m.ID, "changed")
	// The abort travels a hop more than the dead letter at a: on a loaded
	// machine b may get it a moment after a settled.
	petreltest.Eventually(t, "b drops its partial file", func() bool { return len(b.Transfers()) == 0 },
		func() string { return fmt.Sprintf("b still lists transfers: %+v", b.Transfers()) })
}

// changeWhileHashed appends to src while its Send, held by g, hashes it,
// lets the hash go on, and checks that the Send (wait) fails with
// ErrSourceChanged.
func changeWhileHashed(t *testing.T, src string, g *hashGate, wait func() error) {
	t.Helper()
	f, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("more"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	close(g.release)
	if err := wait(); !errors.Is(err, filetransfer.ErrSourceChanged) {
		t.Fatalf("Send of a file that changed while hashed = %v; want ErrSourceChanged", err)
	}
}

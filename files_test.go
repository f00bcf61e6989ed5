package petrel_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// writeRandom writes size random bytes to dir/name and returns the path
// and its SHA-256.
func writeRandom(t testing.TB, dir, name string, size int) (string, string) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:])
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// relayTrio is a → c (relay) → b, relaying "files" to b.
func relayTrio(t *testing.T, mod func(*petrel.Config)) (a, c, b *petrel.Node) {
	t.Helper()
	b = nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(mod))
	c = nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleRelay}}
		if mod != nil {
			mod(cfg)
		}
	}))
	a = nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
		if mod != nil {
			mod(cfg)
		}
	}))
	return a, c, b
}

// receiveFile waits for the completion notice of one file on n's addr.
func receiveFile(t *testing.T, n *petrel.Node, addr string, within time.Duration) *petrel.Delivery {
	t.Helper()
	c, err := n.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	d, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("no file on %s: %v\ntransfers: %+v", addr, err, n.Transfers())
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFileThroughRelay(t *testing.T) {
	a, c, b := relayTrio(t, nil)
	src, sum := writeRandom(t, t.TempDir(), "report.bin", 3<<20+17)
	p := a.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if m.File.Filename != "report.bin" || m.File.Filesize != 3<<20+17 || m.File.FileChecksum != sum {
		t.Fatalf("file props not filled in: %+v", m.File)
	}
	if m.File.SrcIdentifier != "a" || m.File.DestIdentifier != "b" || m.File.CenterIdentifier != "c" {
		t.Fatalf("identifiers: src %q dest %q center %q", m.File.SrcIdentifier, m.File.DestIdentifier, m.File.CenterIdentifier)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	got := d.File.ReceivedFilePath
	if got == "" || filepath.Base(got) != "report.bin" {
		t.Fatalf("receivedFilePath %q", got)
	}
	if s := fileSum(t, got); s != sum {
		t.Fatalf("received SHA-256 %s, sent %s", s, sum)
	}
	if d.File.SendFilePath != "" || d.File.FileChecksum != sum || d.File.CenterIdentifier != "c" {
		t.Fatalf("delivered props %+v", d.File)
	}
	if _, ok := d.Properties.Get("petrel.source-mtime"); ok {
		t.Fatal("the origin's private property reached the destination")
	}
	// The relay frees what it held, and the spools are empty.
	petreltest.Eventually(t, "the relay freeing the file it held", func() bool {
		held, _ := os.ReadDir(filepath.Join(c.DataDir(), "spool", "held"))
		return len(held) == 0
	}, func() string { return "relay still holds the file" })
	for _, nd := range []*petrel.Node{b, c} {
		ents, _ := os.ReadDir(filepath.Join(nd.DataDir(), "spool"))
		for _, e := range ents {
			if e.Name() != "held" {
				t.Errorf("%s spool keeps %s", nd.Name(), e.Name())
			}
		}
	}
}

func TestFileSourceMissingFails(t *testing.T) {
	a, _, _ := relayTrio(t, nil)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = filepath.Join(t.TempDir(), "nope")
	err := a.Producer().Send(context.Background(), m)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("send of a missing file: %v", err)
	}
	m = a.Producer().CreateFileMessage("files@b")
	if err := a.Producer().Send(context.Background(), m); !errors.Is(err, petrel.ErrNoFile) {
		t.Fatalf("send without a path: %v", err)
	}
}

func TestFileLocalDelivery(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"))
	src, sum := writeRandom(t, t.TempDir(), "local.dat", 100000)
	m := a.Producer().CreateFileMessage("inbox")
	m.File.SendFilePath = src
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receiveFile(t, a, "inbox", 5*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatal("local copy differs")
	}
}

// freeAddr returns a loopback address nothing listens on (yet), on a port
// below the ephemeral range, so that no socket bound to port 0 takes it
// before the node that is to listen there does (see nodeproc.FreePort).
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func TestFileNotices(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"), nodes.Listen("127.0.0.1:0"))
	bAddr := freeAddr(t)
	p := a.Producer()
	if _, err := a.Reconfigure(context.Background(), petrel.Config{
		Name: "a", DataDir: a.DataDir(), Listen: a.ListenAddr(), Logger: quiet, Link: nodes.FastLinks,
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bAddr}},
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, sum := writeRandom(t, dir, "good.bin", 200000)
	bad, _ := writeRandom(t, dir, "bad.bin", 200000)
	for _, path := range []string{good, bad} {
		m := p.CreateFileMessage("files@b")
		m.File.SendFilePath = path
		m.Properties.Set(petrel.PropNotify, message.String("notices@a"))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// bad.bin changes while it waits to be sent: b is not up yet.
	if err := os.WriteFile(bad, []byte("something else entirely"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(bAddr), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "a", Connector: nodes.TCP(a)}}
	}))
	d := receiveFile(t, b, "files", 30*time.Second)
	if d.File.Filename != "good.bin" || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
	notices := map[string]*petrel.Delivery{}
	for range 2 {
		n := receiveFile(t, a, "notices", 30*time.Second)
		if n.Data.DataType != petrel.FileNoticeType {
			t.Fatalf("notice of type %q", n.Data.DataType)
		}
		name, _ := n.Properties.Get("filename")
		notices[name.Str()] = n
	}
	if st, _ := notices["good.bin"].Properties.Get("status"); st.Str() != "complete" {
		t.Fatalf("good.bin notice: %v", notices["good.bin"].Properties)
	}
	if p, _ := notices["good.bin"].Properties.Get("receivedFilePath"); p.Str() != d.File.ReceivedFilePath {
		t.Fatalf("notice names %q, delivered %q", p.Str(), d.File.ReceivedFilePath)
	}
	n := notices["bad.bin"]
	st, _ := n.Properties.Get("status")
	reason, _ := n.Properties.Get("reason")
	if st.Str() != "failed" || !strings.Contains(reason.Str(), "changed") {
		t.Fatalf("bad.bin notice: status %q reason %q", st.Str(), reason.Str())
	}
	// The failed file message is dead-lettered with the reason.
	dlq := receiveFile(t, a, "files.dlq", 5*time.Second)
	if !strings.Contains(dlq.Reason, "changed") {
		t.Fatalf("dead letter reason %q", dlq.Reason)
	}
	// Nothing of bad.bin reached b, and b's spool kept nothing of it.
	if ents, _ := os.ReadDir(filepath.Join(b.DataDir(), "received", "files")); len(ents) != 1 {
		t.Fatalf("b received %d files", len(ents))
	}
	petreltest.Eventually(t, "b's spool empty", func() bool { return len(spoolEntries(b)) == 0 }, func() string { return fmt.Sprintf("b's spool keeps %v", spoolEntries(b)) })
}

// spoolEntries lists n's spool, the relay's held folder left out.
func spoolEntries(n *petrel.Node) []string {
	ents, _ := os.ReadDir(filepath.Join(n.DataDir(), "spool"))
	var out []string
	for _, e := range ents {
		if e.Name() != "held" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestFileCorruptedAtRelayIsNeverDelivered damages the copy a relay holds
// before it forwards it: the destination's check refuses it, every time,
// the relay gives it up with the reason, and the destination delivers
// nothing.
func TestFileCorruptedAtRelayIsNeverDelivered(t *testing.T) {
	bAddr := freeAddr(t)
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bAddr}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleRelay}}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
	}))
	src, _ := writeRandom(t, t.TempDir(), "fragile.bin", 1<<20)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// b is down: the relay holds the whole file.
	var held string
	petreltest.Eventually(t, "the relay holding the whole file while b is down", func() bool {
		matches, _ := filepath.Glob(filepath.Join(c.DataDir(), "spool", "held", "*", "fragile.bin"))
		if len(matches) == 1 {
			held = matches[0]
		}
		return held != ""
	}, func() string { return "the relay holds no copy" })
	f, err := os.OpenFile(held, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("damage"), 1000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(bAddr))
	dl := receiveFile(t, c, "files.dlq", 60*time.Second)
	if !strings.Contains(dl.Reason, "checksum") {
		t.Fatalf("dead letter reason %q", dl.Reason)
	}
	if st := b.ReceiverStats(); st.FilesCorrupt < 1 || st.FilesTaken != 0 {
		t.Fatalf("b: corrupt %d, taken %d", st.FilesCorrupt, st.FilesTaken)
	}
	if ents, _ := os.ReadDir(filepath.Join(b.DataDir(), "received", "files")); len(ents) != 0 {
		t.Fatalf("b delivered %d files", len(ents))
	}
	if left := spoolEntries(b); len(left) != 0 {
		t.Fatalf("b's spool keeps %v", left)
	}
}

// TestFileResumesAfterCutLink cuts the link when about half the file is
// at the receiver, and checks that what is sent afterwards is close to
// what was missing: the transfer resumes, it does not start again.
func TestFileResumesAfterCutLink(t *testing.T) {
	mod := func(c *petrel.Config) {
		c.Files = petrel.FilesConfig{ChunkSize: 64 << 10, Window: 32, SyncBytes: 1 << 20}
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(mod))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		mod(c)
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	const size = 64 << 20
	src, sum := writeRandom(t, t.TempDir(), "big.bin", size)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var atCut int64
	petreltest.Eventually(t, "half the file at b", func() bool {
		for _, tr := range b.Transfers() {
			if tr.Offset >= size/2 {
				atCut = tr.Offset
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("transfers %+v", b.Transfers()) })
	wireAtCut := wireBytes(a)
	a.CutLink("b")
	d := receiveFile(t, b, "files", 60*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatal("content differs after the resume")
	}
	after := wireBytes(a) - wireAtCut
	missing := int64(size) - atCut
	t.Logf("durable at the cut %d of %d; sent after the cut %d; missing %d (%.1f%% more)",
		atCut, size, after, missing, 100*float64(after-missing)/float64(missing))
	if after > missing+missing/10 {
		t.Fatalf("sent %d bytes after the cut for %d missing: more than 10%% over", after, missing)
	}
	if after == 0 || atCut == size {
		t.Fatal("the cut came too late to test a resume")
	}
	// What b acked before the cut and got again after it counts once.
	var acked int64
	petreltest.Eventually(t, "a counting the file's bytes acked once", func() bool {
		acked = 0
		for _, l := range a.Links() {
			acked += l.Files.Bytes
		}
		return acked == size
	}, func() string { return fmt.Sprintf("a counts %d bytes acked for one %d-byte file", acked, size) })
}

func wireBytes(n *petrel.Node) int64 {
	var w int64
	for _, l := range n.Links() {
		w += l.Files.Wire
	}
	return w
}

// TestSpoolDropsAbandonedTransfers leaves two partial files in a node's
// spool, one untouched for longer than files.abandon_after: the node drops
// that one when it starts and keeps the other.
func TestSpoolDropsAbandonedTransfers(t *testing.T) {
	dir := t.TempDir()
	sp, err := filetransfer.OpenSpool(filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"old", "recent"} {
		in, err := sp.Begin(id, filetransfer.Info{Filename: id + ".bin", Size: 10, SHA256: strings.Repeat("0", 64)})
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Write(0, []byte("12345")); err != nil {
			t.Fatal(err)
		}
		if err := in.Sync(); err != nil {
			t.Fatal(err)
		}
		in.Close()
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "spool", "old.state"), long, long); err != nil {
		t.Fatal(err)
	}
	n, err := petrel.Open(context.Background(), petrel.Config{Name: "n", DataDir: dir, Logger: quiet,
		Files: petrel.FilesConfig{AbandonAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pending, err := sp.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != "recent" {
		t.Fatalf("spool after start: %+v", pending)
	}
}

// TestEmptyFileThroughRelay sends a file of no bytes: its announcement is
// all there is, and it is taken on the first answer.
func TestEmptyFileThroughRelay(t *testing.T) {
	a, _, b := relayTrio(t, nil)
	src, sum := writeRandom(t, t.TempDir(), "empty.txt", 0)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	if d.File.Filesize != 0 || d.File.FileChecksum != sum || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
}

// TestFileWithKnownChecksum: a checksum the caller sets is used as is
// (Send does not read the file); the right one delivers the file, a wrong
// one is refused as corrupt where the file is verified (here, at once:
// the address is local), and a malformed one is bad input.
func TestFileWithKnownChecksum(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"))
	src, sum := writeRandom(t, t.TempDir(), "known.dat", 300000)
	p := a.Producer()

	m := p.CreateFileMessage("inbox")
	m.File.SendFilePath, m.File.FileChecksum = src, sum
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receiveFile(t, a, "inbox", 5*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum || d.File.FileChecksum != sum || d.File.Filesize != 300000 {
		t.Fatalf("delivered %+v", d.File)
	}

	m = p.CreateFileMessage("inbox")
	m.File.SendFilePath = src
	m.File.FileChecksum = strings.Repeat("0", 64)
	if err := p.Send(context.Background(), m); !errors.Is(err, filetransfer.ErrCorrupt) {
		t.Fatalf("send with a wrong checksum: %v, want ErrCorrupt", err)
	}

	m = p.CreateFileMessage("inbox")
	m.File.SendFilePath = src
	m.File.FileChecksum = strings.ToUpper(sum)
	if err := p.Send(context.Background(), m); !errors.Is(err, filetransfer.ErrBadInfo) {
		t.Fatalf("send with an upper-case checksum: %v, want ErrBadInfo", err)
	}
}

// TestFileWithWrongKnownChecksumFailsAcrossALink: across a relay, a wrong
// checksum given by the caller fails the transfer for good (dead-lettered
// at the origin) and delivers nothing.
func TestFileWithWrongKnownChecksumFailsAcrossALink(t *testing.T) {
	a, _, b := relayTrio(t, nil)
	src, _ := writeRandom(t, t.TempDir(), "wrong.bin", 200000)
	p := a.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	m.File.FileChecksum = strings.Repeat("ab", 32)
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the file given up at a", func() bool {
		for _, l := range a.Links() {
			if l.Files.Failed > 0 {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	c, err := b.Consumer("files")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Poll(); err == nil {
		t.Fatalf("b got a file with a wrong checksum: %+v", d.File)
	}
}

//go:build linux

package petrel_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/internal/tmpfs"
)

// TestFileFullSpoolPausesThenResumes receives a 6 MiB file on a node whose
// spool is a 2 MiB tmpfs. The transfer must pause with a status that says
// the spool is full, corrupt nothing, and complete once the filesystem
// grows.
func TestFileFullSpoolPausesThenResumes(t *testing.T) {
	a, b, spool := fullSpoolPair(t)
	src, sum := writeRandom(t, t.TempDir(), "big.bin", 6<<20)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var paused petrel.TransferStatus
	petreltest.Eventually(t, "a transfer paused on a full spool", func() bool {
		for _, tr := range b.Transfers() {
			if tr.State == "paused" && strings.Contains(tr.Error, "spool full") {
				paused = tr
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no paused transfer: %+v", b.Transfers()) })
	t.Logf("paused at %d of %d: %s", paused.Offset, paused.Size, paused.Error)
	if paused.Offset == 0 || paused.Offset >= paused.Size {
		t.Fatalf("paused at %d", paused.Offset)
	}
	tmpfs.Grow(t, spool, "32m")
	d := receiveFile(t, b, "files", 60*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatal("the file differs after the pause")
	}
	if tr := b.Transfers(); len(tr) != 0 {
		t.Fatalf("transfers left: %+v", tr)
	}
}

// A transfer paused on a receiver whose disk is full waits longer and
// longer between tries (1 s, doubling), rather than opening a session
// and sending again what came after its checkpoint every reconnect
// backoff; and the sender counts the bytes its next hop acked once, not
// once per try.
func TestFileFullSpoolBacksOff(t *testing.T) {
	a, b, spool := fullSpoolPair(t)
	const size = 6 << 20
	src, sum := writeRandom(t, t.TempDir(), "big.bin", size)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "a transfer paused on a full spool", func() bool {
		for _, tr := range b.Transfers() {
			if tr.State == "paused" && strings.Contains(tr.Error, "spool full") {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no paused transfer: %+v", b.Transfers()) })
	// With the reconnect backoff of the test nodes (at most 200 ms), 6 s
	// would see some 30 sessions; growing waits from 1 s see 3 or 4.
	before := petrel.FilesAnnounced(b)
	time.Sleep(6 * time.Second)
	if tries := petrel.FilesAnnounced(b) - before; tries > 5 {
		t.Fatalf("%d file sessions in 6 s on a full spool; want the sender to back off", tries)
	}
	tmpfs.Grow(t, spool, "32m")
	d := receiveFile(t, b, "files", 90*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatal("the file differs after the pause")
	}
	var acked int64
	for _, l := range a.Links() {
		acked += l.Files.Bytes
	}
	if acked > size {
		t.Fatalf("a counts %d bytes acked for one %d-byte file", acked, size)
	}
}

// fullSpoolPair opens b, whose spool and received folders are on a 2 MiB
// tmpfs (spool), and a, whose neighbour it is.
func fullSpoolPair(t *testing.T) (a, b *petrel.Node, spool string) {
	t.Helper()
	spool = tmpfs.Mount(t, "2m")
	b = nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Files = petrel.FilesConfig{Spool: filepath.Join(spool, "spool"), Received: filepath.Join(spool, "in"),
			ChunkSize: 64 << 10, SyncBytes: 256 << 10}
	}))
	a = nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	return a, b, spool
}

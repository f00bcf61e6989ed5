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
	spool := tmpfs.Mount(t, "2m")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Files = petrel.FilesConfig{Spool: filepath.Join(spool, "spool"), Received: filepath.Join(spool, "in"),
			ChunkSize: 64 << 10, SyncBytes: 256 << 10}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
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

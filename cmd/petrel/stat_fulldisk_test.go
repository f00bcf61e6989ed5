//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/internal/tmpfs"
)

// A file transfer paused at the node on a full spool is listed by petrel
// stat's text, with its state and "spool full", as the README says, not
// only by --json.
func TestStatListsPausedTransfers(t *testing.T) {
	spool := tmpfs.Mount(t, "2m")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
		c.Files = petrel.FilesConfig{Spool: filepath.Join(spool, "spool"), Received: filepath.Join(spool, "in"),
			ChunkSize: 64 << 10, SyncBytes: 256 << 10}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	src := filepath.Join(t.TempDir(), "big.bin")
	writeFile(t, src, strings.Repeat("x", 6<<20))
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "b's transfer paused on its full spool", func() bool {
		ts := b.Transfers()
		return len(ts) == 1 && ts[0].State == "paused"
	}, func() string { return fmt.Sprintf("%+v", b.Transfers()) })
	r := runPetrel(t, 10*time.Second, "stat", "--server", b.AdminAddr())
	r.wantCode(t, 0)
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "big.bin") {
			line = l
		}
	}
	for _, want := range []string{"paused", "files@b", "spool full"} {
		if !strings.Contains(line, want) {
			t.Fatalf("petrel stat does not list the paused transfer with %q:\n%s", want, r.stdout)
		}
	}
	tmpfs.Grow(t, spool, "32m") // the transfer ends before the nodes close
	petreltest.Eventually(t, "the file delivered", func() bool { return len(b.Transfers()) == 0 })
}

package petrel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A file the node after the relay refuses for good (larger than its spool
// quota) is dead-lettered at the relay, which held the only whole copy
// once the origin handed it over. The relay keeps that copy: once the
// quota is fixed, petrel dlq replay delivers the file, and the copy goes
// once it is handed over.
func TestFileRefusedAfterRelayIsReplayedFromTheHeldCopy(t *testing.T) {
	bAddr, bDir := freeAddr(t), t.TempDir()
	openB := func(quota int64) *petrel.Node {
		return nodes.Open(t, nodes.Name("b"), nodes.Listen(bAddr), nodes.With(func(c *petrel.Config) {
			c.DataDir = bDir
			c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
			c.Files.MaxSpoolBytes = quota
		}))
	}
	b := openB(1 << 20)
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bAddr}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleRelay}}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
	}))
	path, sum := writeRandom(t, t.TempDir(), "big.bin", 2<<20)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = path
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	petreltest.Eventually(t, "the file dead-lettered at c", func() bool {
		dl, _ := c.DeadLetters(ctx, "files@b", 0)
		return len(dl) == 1
	}, func() string { return fmt.Sprintf("transfers at c: %+v", c.Transfers()) })
	// The origin is done with it: its copy may go (an outbox's after:
	// delete), and the relay's is all there is.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openB(0) // the operator raises the quota
	if n, err := c.Replay(ctx, "files@b", 0); err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("delivered content differs")
	}
	held := filepath.Join(c.DataDir(), "spool", "held")
	petreltest.Eventually(t, "c's held copy gone once handed over", func() bool { return len(dirList(held)) == 0 },
		func() string { return fmt.Sprintf("held/ %v", dirList(held)) })
}

// The relay keeps a failed file's copy for files.abandon_after: past it
// (here, at the relay's next start) the copy goes, and a replay of the
// dead letter fails again saying the copy is gone, not with a bare stat
// error.
func TestFileRefusedAfterRelayKeepsItsCopyForAbandonAfter(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
		c.Files.MaxSpoolBytes = 1 << 20
	}))
	cDir, cAddr := t.TempDir(), freeAddr(t)
	openC := func() *petrel.Node {
		return nodes.Open(t, nodes.Name("c"), nodes.Listen(cAddr), nodes.With(func(cfg *petrel.Config) {
			cfg.DataDir = cDir
			cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
			cfg.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleRelay}}
			cfg.Files.AbandonAfter = 300 * time.Millisecond
		}))
	}
	c := openC()
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: "tcp://" + cAddr}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
	}))
	path, _ := writeRandom(t, t.TempDir(), "big.bin", 2<<20)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = path
	ctx := context.Background()
	if err := a.Producer().Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(cDir, "spool", "held")
	petreltest.Eventually(t, "the file dead-lettered at c, its copy kept", func() bool {
		dl, _ := c.DeadLetters(ctx, "files@b", 0)
		return len(dl) == 1 && len(dirList(held)) == 2 // the copy's folder and its mark
	}, func() string { return fmt.Sprintf("held/ %v", dirList(held)) })
	time.Sleep(400 * time.Millisecond) // past abandon_after
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openC()
	if names := dirList(held); len(names) != 0 {
		t.Fatalf("held/ after abandon_after: %v", names)
	}
	if n, err := c.Replay(ctx, "files@b", 0); err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	var reason string
	petreltest.Eventually(t, "the replayed file dead-lettered again, saying why", func() bool {
		dl, _ := c.DeadLetters(ctx, "files@b", 0)
		if len(dl) == 1 {
			reason = dl[0].Reason
		}
		return strings.Contains(reason, "no longer holds its copy")
	}, func() string { return "reason: " + reason })
}

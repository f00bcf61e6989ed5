//go:build unix

package petrel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// Whoever may write into an outbox folder swaps a file the outbox found
// complete for a symbolic link to a file outside the folder, before the
// node reads it. The node must not follow the link: nothing of the
// outside file is sent, the link is left alone in the folder (as any link
// there is), and the outbox goes on with the next file. Both a local
// address (the file is copied here) and one on another node (its sender
// reads it later) are tried.
func TestOutboxDoesNotFollowALinkSwappedInBeforeTheRead(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			out := t.TempDir()
			secret := filepath.Join(t.TempDir(), "secret.txt")
			if err := os.WriteFile(secret, []byte("TOP-SECRET\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var a, dst *petrel.Node
			to := "files"
			b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
				c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
			}))
			if remote {
				to, dst = "files@b", b
			}
			a = nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
				c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
				c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
				c.Outboxes = []petrel.OutboxConfig{{Dir: out, To: to, Quiet: 100 * time.Millisecond}}
			}))
			if !remote {
				dst = a
			}
			victim := filepath.Join(out, "victim.txt")
			petrel.SetOutboxHook(a, func(path string) {
				if path != victim {
					return
				}
				tmp := filepath.Join(out, ".swap")
				if err := os.Symlink(secret, tmp); err != nil {
					t.Error(err)
				}
				if err := os.Rename(tmp, victim); err != nil {
					t.Error(err)
				}
			})
			if err := os.WriteFile(victim+".part", []byte("innocent\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(victim+".part", victim); err != nil {
				t.Fatal(err)
			}
			// One file at a time leaves an outbox: once the next one is
			// through, the victim's turn is over.
			dropPart(t, out, "next.bin", 1000)

			c, err := dst.Consumer("files")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				d, err := c.Receive(ctx)
				if err != nil {
					t.Fatalf("next.bin not delivered: %v; outbox %v", err, dirList(out))
				}
				d.Ack()
				if got, _ := os.ReadFile(d.File.ReceivedFilePath); string(got) == "TOP-SECRET\n" {
					t.Fatalf("%s delivered the file the link points to", d.File.Filename)
				}
				if d.File.Filename != "next.bin" {
					t.Fatalf("delivered %s, want only next.bin", d.File.Filename)
				}
				break
			}
			petreltest.Eventually(t, "next.bin in sent/, the link left alone", func() bool {
				fi, err := os.Lstat(victim)
				return err == nil && fi.Mode()&os.ModeSymlink != 0 &&
					fmt.Sprint(dirList(filepath.Join(out, "sent"))) == "[next.bin]" &&
					len(dirList(filepath.Join(out, "failed"))) == 0
			}, func() string {
				return fmt.Sprintf("outbox %v, sent/ %v, failed/ %v", dirList(out),
					dirList(filepath.Join(out, "sent")), dirList(filepath.Join(out, "failed")))
			})
		})
	}
}

// A file sent by its path through the API may be a symbolic link: the
// caller names the file it means. It is sent under the link's name.
func TestSendFileThroughALink(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
	}))
	src, sum := writeRandom(t, t.TempDir(), "real.bin", 5000)
	link := filepath.Join(t.TempDir(), "report.bin")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	p := a.Producer()
	m := p.CreateFileMessage("files")
	m.File.SendFilePath = link
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receiveFile(t, a, "files", 10*time.Second)
	if d.File.Filename != "report.bin" || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
}

package petrel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// outboxPair is a (with the outbox folders) → b, which receives "files"
// and refuses anything else.
func outboxPair(t *testing.T, outboxes func(b *petrel.Node) []petrel.OutboxConfig) (a, b *petrel.Node, cfg petrel.Config) {
	t.Helper()
	b = nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.NoAutoCreate = true
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
	}))
	a = nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		c.Outboxes = outboxes(b)
		cfg = *c
	}))
	return a, b, cfg
}

func TestOutboxSendsFilesFromStartupAndMovesThem(t *testing.T) {
	out := t.TempDir()
	_, sum := writeRandom(t, out, "early.bin", 300000)
	_, b, _ := outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		return []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 100 * time.Millisecond}}
	})
	d := receiveFile(t, b, "files", 30*time.Second)
	if d.File.Filename != "early.bin" || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
	// A move links the file into sent/, then removes it from the outbox:
	// both steps are waited for.
	petreltest.Eventually(t, "early.bin moved to sent/", func() bool {
		_, inSent := os.Stat(filepath.Join(out, "sent", "early.bin"))
		_, inOutbox := os.Stat(filepath.Join(out, "early.bin"))
		return inSent == nil && os.IsNotExist(inOutbox)
	}, func() string {
		_, inSent := os.Stat(filepath.Join(out, "sent", "early.bin"))
		_, inOutbox := os.Stat(filepath.Join(out, "early.bin"))
		return fmt.Sprintf("in sent/: %v; still in the outbox: %v", inSent, inOutbox)
	})
}

func TestOutboxWaitsForSlowWriter(t *testing.T) {
	out := t.TempDir()
	_, b, _ := outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		return []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 300 * time.Millisecond}}
	})
	c, err := b.Consumer("files")
	if err != nil {
		t.Fatal(err)
	}
	// Written in pieces with pauses shorter than quiet: nothing may be
	// sent until the writer is done.
	f, err := os.Create(filepath.Join(out, "slow.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := f.WriteString(strings.Repeat("x", 10000) + "\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if d, err := c.Poll(); err == nil {
			t.Fatalf("a file arrived while being written (piece %d): %+v", i, d.File)
		}
	}
	f.Close()
	// And the .part convention: sent once renamed, never as .part. That a
	// .part file is never offered however long it waits is decided by the
	// quiet timer, and tested on a fake clock in filetransfer
	// (TestOutboxPartWaitsForItsRename); here the node sends the renamed
	// file, and nothing of the .part file ends in failed/.
	part := filepath.Join(out, "quick.csv.part")
	if err := os.WriteFile(part, []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(part, filepath.Join(out, "quick.csv")); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for range 2 {
		d := receiveFile(t, b, "files", 30*time.Second)
		got[d.File.Filename] = d.File.Filesize
	}
	if got["slow.log"] != 8*10001 || got["quick.csv"] != 4 {
		t.Fatalf("received %v", got)
	}
	petreltest.Eventually(t, "slow.log and quick.csv moved to sent/", func() bool {
		names, _ := os.ReadDir(filepath.Join(out, "sent"))
		return len(names) == 2
	}, func() string { return fmt.Sprint(os.ReadDir(filepath.Join(out, "sent"))) })
	if failed, _ := os.ReadDir(filepath.Join(out, "failed")); len(failed) != 0 {
		t.Fatalf("failed/ holds %v", failed)
	}
}

func TestOutboxFailedFileMovesToFailedWithReason(t *testing.T) {
	out := t.TempDir()
	writeRandom(t, out, "nobody.bin", 1000)
	outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		// b has no address "nowhere" and creates none.
		return []petrel.OutboxConfig{{Dir: out, To: "nowhere@b", Quiet: 100 * time.Millisecond}}
	})
	reason := filepath.Join(out, "failed", "nobody.bin.reason")
	petreltest.Eventually(t, "failed/nobody.bin.reason", func() bool {
		_, err := os.Stat(reason)
		return err == nil
	}, func() string { return "no failed/nobody.bin.reason" })
	b, _ := os.ReadFile(reason)
	if !strings.Contains(string(b), "nowhere") {
		t.Fatalf("reason %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "failed", "nobody.bin")); err != nil {
		t.Fatal(err)
	}
}

func TestOutboxAddedLive(t *testing.T) {
	out := t.TempDir()
	a, b, cfg := outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig { return nil })
	_, sum := writeRandom(t, out, "later.bin", 5000)
	cfg.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", After: "delete", Quiet: 100 * time.Millisecond}}
	r, err := a.Reconfigure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(r.Applied, ","), "outboxes") {
		t.Fatalf("applied %v", r.Applied)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	if fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatal("content differs")
	}
	petreltest.Eventually(t, "later.bin deleted after sending", func() bool {
		_, err := os.Stat(filepath.Join(out, "later.bin"))
		return os.IsNotExist(err)
	}, func() string { return "later.bin not deleted after sending" })
	// Removed again: a new file stays where it is. Reconfigure returns once
	// the removed outbox stopped watching. The same Reconfigure adds
	// another outbox with the same quiet period, whose file, dropped after
	// stays.bin, is sent and deleted: the positive event that shows the
	// node's outboxes ran for longer than stays.bin would have taken.
	other := t.TempDir()
	cfg.Outboxes = []petrel.OutboxConfig{{Dir: other, To: "files@b", After: "delete", Quiet: 100 * time.Millisecond}}
	if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	writeRandom(t, out, "stays.bin", 10)
	writeRandom(t, other, "marker.bin", 10)
	if d := receiveFile(t, b, "files", 30*time.Second); d.File.Filename != "marker.bin" {
		t.Fatalf("received %q, want marker.bin: a removed outbox still sent its file", d.File.Filename)
	}
	petreltest.Eventually(t, "marker.bin deleted after sending", func() bool {
		_, err := os.Stat(filepath.Join(other, "marker.bin"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(out, "stays.bin")); err != nil {
		t.Fatal("a removed outbox still sent its file")
	}
}

// The node stops while its outbox hashes a file whose transfer already
// runs (the checksum follows the content). The hash ends with the
// outbox's context, but that is no verdict on the file: it must not be
// given up and moved to failed/. The restarted node sends it, and the
// outbox moves it to sent/.
func TestOutboxNodeStopsWhileHashing(t *testing.T) {
	out := t.TempDir()
	const size = 3 << 20
	_, sum := writeRandom(t, out, "big.bin", size)
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	dir := t.TempDir()
	base := func(c *petrel.Config) {
		c.DataDir = dir
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}
	var cfg petrel.Config
	a := nodes.Open(t, nodes.Name("a"), nodes.LeasesMayRemain(), nodes.With(func(c *petrel.Config) { base(c); cfg = *c }))
	g := holdHashes(a) // before the outbox starts: Reconfigure starts it
	cfg.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 100 * time.Millisecond}}
	if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.stored:
	case <-time.After(petreltest.Patience):
		t.Fatal("the outbox never stored the file message")
	}
	allBytesAt(t, b, size) // the transfer waits for the checksum
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	close(g.release) // the outbox's hash then sees its context end
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if failed, _ := os.ReadDir(filepath.Join(out, "failed")); len(failed) != 0 {
		t.Fatalf("a node that stopped while hashing moved the file to failed/: %v", failed)
	}
	if _, err := os.Stat(filepath.Join(out, "big.bin")); err != nil {
		t.Fatalf("the file left the outbox: %v", err)
	}
	nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		base(c)
		c.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 100 * time.Millisecond}}
	}))
	deliveredWith(t, b, sum, 30*time.Second)
	petreltest.Eventually(t, "big.bin moved to sent/", func() bool {
		_, err := os.Stat(filepath.Join(out, "sent", "big.bin"))
		return err == nil
	}, func() string { return fmt.Sprint(os.ReadDir(out)) })
	if failed, _ := os.ReadDir(filepath.Join(out, "failed")); len(failed) != 0 {
		t.Fatalf("failed/ holds %v", failed)
	}
}

// An outbox is removed (by a reload, or at a restart without it) while
// the transfer of a file it took still waits for b. When b takes the
// file, the file leaves the folder as the outbox said when it took it
// (here deleted), and the node forgets which file the message was for:
// left in the folder, it would be sent again by the next outbox on it.
func TestOutboxRemovedWhileItsFileIsSent(t *testing.T) {
	for _, how := range []string{"reload", "restart"} {
		t.Run(how, func(t *testing.T) {
			out := t.TempDir()
			bAddr := freeAddr(t) // b is down until the outbox is gone
			dir := t.TempDir()
			base := func(c *petrel.Config) {
				c.DataDir = dir
				c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bAddr}}
			}
			var cfg petrel.Config
			a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
				base(c)
				c.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", After: "delete", Quiet: 100 * time.Millisecond}}
				cfg = *c
			}))
			_, sum := writeRandom(t, out, "pending.bin", 5000)
			waitDepth(t, a, "files@b", 1) // the outbox took the file
			cfg.Outboxes = nil
			switch how {
			case "reload":
				if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
			case "restart":
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				a = nodes.Open(t, nodes.Name("a"), nodes.With(base))
			}
			if _, err := os.Stat(filepath.Join(out, "pending.bin")); err != nil {
				t.Fatalf("the file left the folder before b took it: %v", err)
			}
			b := nodes.Open(t, nodes.Name("b"), nodes.Listen(bAddr), nodes.With(func(c *petrel.Config) {
				c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
			}))
			deliveredWith(t, b, sum, 30*time.Second)
			petreltest.Eventually(t, "pending.bin deleted once b took it", func() bool {
				_, err := os.Stat(filepath.Join(out, "pending.bin"))
				return os.IsNotExist(err)
			}, func() string { return fmt.Sprint(os.ReadDir(out)) })
			if sent, _ := os.ReadDir(filepath.Join(out, "sent")); len(sent) != 0 {
				t.Fatalf("sent/ holds %v, want nothing (after: delete)", sent)
			}
			// The records go just after the file.
			var left []string
			petreltest.Eventually(t, "no record of the file left", func() bool {
				left = nil
				for _, prefix := range []string{"outbox:", "outbox-sent:"} {
					keys, _, err := a.Store().MetaPrefix(context.Background(), prefix)
					if err != nil {
						t.Fatal(err)
					}
					left = append(left, keys...)
				}
				return len(left) == 0
			}, func() string { return fmt.Sprint("records left: ", left) })
		})
	}
}

// A failed file named like the reason file of another ("report.reason")
// is never replaced by that reason: the later failed file takes a name
// whose reason name is free too.
func TestOutboxFailedReasonNeverReplacesAFailedFile(t *testing.T) {
	out := t.TempDir()
	outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		return []petrel.OutboxConfig{{Dir: out, To: "nowhere@b", Quiet: 100 * time.Millisecond}}
	})
	failed := filepath.Join(out, "failed")
	drop := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(out, name+".part"), []byte("precious data of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(out, name+".part"), filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
		petreltest.Eventually(t, name+" out of the outbox", func() bool {
			_, err := os.Stat(filepath.Join(out, name))
			return os.IsNotExist(err)
		}, func() string { return fmt.Sprint(dirList(out), dirList(failed)) })
	}
	drop("report.reason")
	drop("report")
	petreltest.Eventually(t, "both failed files and their reasons", func() bool {
		names := dirList(failed)
		return len(names) == 4 && !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".tmp") })
	},
		func() string { return fmt.Sprint(dirList(failed)) })
	var data int
	for _, n := range dirList(failed) {
		b, err := os.ReadFile(filepath.Join(failed, n))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(string(b), "precious data of "):
			data++
			reason, err := os.ReadFile(filepath.Join(failed, n+".reason"))
			if err != nil || !strings.Contains(string(reason), "nowhere") {
				t.Errorf("the reason of %s: %q, %v", n, reason, err)
			}
		case !strings.Contains(string(b), "nowhere"):
			t.Errorf("%s holds %q", n, b)
		}
	}
	if data != 2 {
		t.Fatalf("failed/ holds %d of the 2 files: %v", data, dirList(failed))
	}
}

// A failed file whose name is too long for "<name>.reason" beside it
// (248 to 255 bytes) is shortened in failed/, as a numbered name is, so
// that its reason file is there too.
func TestOutboxFailedLongNameKeepsItsReason(t *testing.T) {
	out := t.TempDir()
	outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		return []petrel.OutboxConfig{{Dir: out, To: "nowhere@b", Quiet: 100 * time.Millisecond}}
	})
	name := strings.Repeat("m", 246) + ".bin" // 250 bytes
	if err := os.WriteFile(filepath.Join(out, name), []byte("long-named data"), 0o644); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(out, "failed")
	petreltest.Eventually(t, "the file and its reason in failed/", func() bool {
		names := dirList(failed)
		return len(names) == 2 && !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".tmp") })
	},
		func() string { return fmt.Sprint(dirList(out), dirList(failed)) })
	var data string
	for _, n := range dirList(failed) {
		if !strings.HasSuffix(n, ".reason") {
			data = n
		}
	}
	if b, err := os.ReadFile(filepath.Join(failed, data)); err != nil || string(b) != "long-named data" {
		t.Fatalf("failed/ holds %v: %q, %v", dirList(failed), b, err)
	}
	if !strings.HasPrefix(data, strings.Repeat("m", 200)) || !strings.HasSuffix(data, ".bin") {
		t.Fatalf("the failed file is called %q", data)
	}
	reason, err := os.ReadFile(filepath.Join(failed, data+".reason"))
	if err != nil || !strings.Contains(string(reason), "nowhere") {
		t.Fatalf("its reason: %q, %v", reason, err)
	}
}

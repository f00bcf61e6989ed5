package petrel_test

import (
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

// outboxToB opens b, which receives "files", and returns a function that
// opens a with the outbox out toward it, on the data directory dir each
// time (so a restart keeps a's records).
func outboxToB(t *testing.T, out string, mods ...func(*petrel.Config)) (openA func() *petrel.Node, b *petrel.Node) {
	t.Helper()
	b = nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
	}))
	dir := t.TempDir()
	return func() *petrel.Node {
		return nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
			c.DataDir = dir
			c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
			c.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 100 * time.Millisecond}}
			for _, mod := range mods {
				mod(c)
			}
		}))
	}, b
}

// drainFiles acks every file message waiting on b's "files" and returns
// their names.
func drainFiles(t *testing.T, b *petrel.Node) []string {
	t.Helper()
	c, err := b.Consumer("files")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		d, err := c.Poll()
		if err != nil {
			return names
		}
		names = append(names, d.File.Filename)
		d.Ack()
	}
}

// A cleanup job removes sent/ while the node runs. The next file sent is
// moved all the same, into a sent/ made again, instead of staying in the
// outbox to be sent again at the next start.
func TestOutboxSentFolderRemovedWhileRunning(t *testing.T) {
	out := t.TempDir()
	openA, b := outboxToB(t, out)
	openA()
	if err := os.RemoveAll(filepath.Join(out, "sent")); err != nil {
		t.Fatal(err)
	}
	dropPart(t, out, "b.txt", 1000)
	petreltest.Eventually(t, "b.txt moved into a new sent/", func() bool {
		_, err := os.Stat(filepath.Join(out, "sent", "b.txt"))
		return err == nil && fmt.Sprint(dirList(out)) == "[failed sent]"
	}, func() string {
		return fmt.Sprintf("outbox %v, sent/ %v", dirList(out), dirList(filepath.Join(out, "sent")))
	})
	if got := drainFiles(t, b); fmt.Sprint(got) != "[b.txt]" {
		t.Fatalf("b received %v, want b.txt once", got)
	}
}

// A file that was sent but cannot leave the folder (here sent/ is a
// regular file, so nothing can be put in it) stays in the outbox. It must
// not be sent again, neither while the node runs nor after a restart:
// the node keeps its record, and at the restart only moves it, once the
// move can be done.
func TestOutboxFileThatCannotLeaveIsNotSentAgain(t *testing.T) {
	out := t.TempDir()
	openA, b := outboxToB(t, out)
	a := openA()
	sent := filepath.Join(out, "sent")
	got := sendWhereSentIsAFile(t, out, b)
	time.Sleep(500 * time.Millisecond) // time for a wrong second send, and for the failed move
	got = append(got, drainFiles(t, b)...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "b.txt")); err != nil {
		t.Fatalf("b.txt left the outbox, though sent/ could not take it: %v", err)
	}
	if err := os.Remove(sent); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sent, 0o750); err != nil {
		t.Fatal(err)
	}
	openA()
	petreltest.Eventually(t, "b.txt moved into sent/ after the restart", func() bool {
		_, err := os.Stat(filepath.Join(sent, "b.txt"))
		return err == nil && fmt.Sprint(dirList(out)) == "[failed sent]"
	}, func() string { return fmt.Sprintf("outbox %v, sent/ %v", dirList(out), dirList(sent)) })
	time.Sleep(200 * time.Millisecond)
	got = append(got, drainFiles(t, b)...)
	if fmt.Sprint(got) != "[b.txt]" {
		t.Fatalf("b received %v, want b.txt once", got)
	}
}

// The outbox folder is removed while the node runs, then made again under
// the same path. A file dropped into the new folder is sent and moved to
// its sent/, as in the old one: the node watches the folder again. The
// metric petrel_outbox_watching shows the folder unwatched meanwhile.
func TestOutboxFolderRemovedAndMadeAgainIsWatched(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	openA, b := outboxToB(t, out, withAdmin)
	a := openA()
	series := fmt.Sprintf("petrel_outbox_watching{dir=%q}", out)
	if got := scrape(t, a)[series]; got != 1 {
		t.Fatalf("%s = %v before the removal, want 1", series, got)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, series+" at 0", func() bool { return scrape(t, a)[series] == 0 },
		func() string { return fmt.Sprint(scrape(t, a)[series]) })
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dropPart(t, out, "after.txt", 1000)
	petreltest.Eventually(t, "after.txt sent and in sent/", func() bool {
		_, err := os.Stat(filepath.Join(out, "sent", "after.txt"))
		return err == nil
	}, func() string { return fmt.Sprintf("outbox %v", dirList(out)) })
	if got := drainFiles(t, b); fmt.Sprint(got) != "[after.txt]" {
		t.Fatalf("b received %v, want after.txt once", got)
	}
	if got := scrape(t, a)[series]; got != 1 {
		t.Fatalf("%s = %v once the folder is back, want 1", series, got)
	}
}

// A file that was sent but could not leave the folder (sent/ is a regular
// file) is moved once the cause is mended, without a restart: the outbox
// offers it again after a wait, and the node, by its record, only moves
// it. petrel_outbox_stuck_files counts it meanwhile.
func TestOutboxFileThatCannotLeaveMovesOnceItCan(t *testing.T) {
	out := t.TempDir()
	openA, b := outboxToB(t, out, withAdmin)
	a := openA()
	sent := filepath.Join(out, "sent")
	got := sendWhereSentIsAFile(t, out, b)
	series := fmt.Sprintf("petrel_outbox_stuck_files{dir=%q}", out)
	petreltest.Eventually(t, "the file counted stuck", func() bool { return scrape(t, a)[series] == 1 },
		func() string { return fmt.Sprintf("%s = %v", series, scrape(t, a)[series]) })
	if err := os.Remove(sent); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sent, 0o750); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "b.txt moved into sent/ without a restart", func() bool {
		_, err := os.Stat(filepath.Join(sent, "b.txt"))
		return err == nil && fmt.Sprint(dirList(out)) == "[failed sent]"
	}, func() string { return fmt.Sprintf("outbox %v, sent/ %v", dirList(out), dirList(sent)) })
	// The outbox counts it no more once its move is done, which it
	// notes after the file is in sent/.
	petreltest.Eventually(t, "the file no longer counted stuck", func() bool { return scrape(t, a)[series] == 0 },
		func() string { return fmt.Sprintf("%s = %v once the file moved", series, scrape(t, a)[series]) })
	time.Sleep(200 * time.Millisecond) // time for a wrong second send
	got = append(got, drainFiles(t, b)...)
	if fmt.Sprint(got) != "[b.txt]" {
		t.Fatalf("b received %v, want b.txt once", got)
	}
}

// sendWhereSentIsAFile makes the outbox out's sent/ a regular file, so
// that nothing can be put in it, drops b.txt in out and returns what b
// received once it came.
func sendWhereSentIsAFile(t *testing.T, out string, b *petrel.Node) []string {
	t.Helper()
	sent := filepath.Join(out, "sent")
	if err := os.RemoveAll(sent); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dropPart(t, out, "b.txt", 1000)
	var got []string
	petreltest.Eventually(t, "b.txt delivered", func() bool {
		got = append(got, drainFiles(t, b)...)
		return len(got) > 0
	}, func() string { return fmt.Sprintf("outbox %v", dirList(out)) })
	return got
}

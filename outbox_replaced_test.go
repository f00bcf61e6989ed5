package petrel_test

import (
	"crypto/sha256"
	"encoding/hex"
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

// dropPart drops a file into an outbox the way the README says a writer
// should: written as name.part, then renamed to name (over any file of
// that name). It returns the content's SHA-256.
func dropPart(t *testing.T, dir, name string, size int) string {
	t.Helper()
	_, sum := writeRandom(t, dir, name+".part", size)
	if err := os.Rename(filepath.Join(dir, name+".part"), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return sum
}

// A writer drops the next report.bin over the one being sent, once the
// whole of the old one is read and on its way but before the next hop's
// final ack. The old one is delivered (or, had the replacement come
// before its last read, fails as changed); either way the new one must
// not leave the folder as if it were sent: it is offered and delivered
// itself, and only then is it in sent/.
func TestOutboxFileReplacedBeforeItsFinalAckIsSentItself(t *testing.T) {
	const rate = 256 << 10 // bytes a second toward b: the old report takes ~2 s
	out := t.TempDir()
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "files", Role: address.RoleReceive}}
	}))
	proxy := petreltest.NewProxy(t, b.ListenAddr(), petreltest.Pace(rate, 0))
	nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + proxy.Addr()}}
		// The whole file fits in the window: every chunk is read, and
		// checked, at once, and the transfer then waits for the acks.
		c.Files = petrel.FilesConfig{ChunkSize: 64 << 10, Window: 16}
		c.Outboxes = []petrel.OutboxConfig{{Dir: out, To: "files@b", Quiet: 100 * time.Millisecond}}
	}))
	oldSum := dropPart(t, out, "report.bin", 512<<10)
	petreltest.Eventually(t, "the old report on its way", func() bool { return proxy.Forwarded() > 128<<10 },
		func() string { return fmt.Sprintf("%d bytes toward b", proxy.Forwarded()) })
	newSum := dropPart(t, out, "report.bin", 64<<10)

	c, err := b.Consumer("files")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	petreltest.Eventually(t, "the new report delivered", func() bool {
		for {
			d, err := c.Poll()
			if err != nil {
				break
			}
			got = append(got, fileSum(t, d.File.ReceivedFilePath))
			d.Ack()
		}
		return len(got) > 0 && got[len(got)-1] == newSum
	}, func() string {
		return fmt.Sprintf("delivered %v (old %s, new %s); outbox %v, sent/ %v", got, oldSum[:8], newSum[:8],
			dirList(out), dirList(filepath.Join(out, "sent")))
	})
	petreltest.Eventually(t, "the new report in sent/", func() bool {
		return fileSumOr(filepath.Join(out, "sent", "report.bin")) == newSum && len(dirList(out)) == 2
	}, func() string {
		return fmt.Sprintf("outbox %v, sent/ %v", dirList(out), dirList(filepath.Join(out, "sent")))
	})
	if failed := dirList(filepath.Join(out, "failed")); len(failed) != 0 {
		t.Fatalf("failed/ holds %v", failed)
	}
}

func dirList(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// fileSumOr is the SHA-256 of the file at path, or "" if it cannot be
// read (not there yet).
func fileSumOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

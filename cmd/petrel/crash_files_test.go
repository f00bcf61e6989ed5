package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestFileSurvivesKills sends a file a -> c (relay) -> b with the three
// nodes as petrel processes. While a sends to c, c is killed with SIGKILL
// and restarted; while c forwards to b, b is. The file must arrive whole
// (same SHA-256), once, and each resume must send little more than what
// the killed node did not hold yet.
func TestFileSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	const size = 64 << 20
	cl, sum := sendFileAcross(t, size, func(cl *crashCluster) {
		// c reaches b through an 8 MiB/s proxy. c forwards a file on while
		// it still receives it (cut-through): unpaced, b would hold most of
		// the file by the time a is done sending to c, and the test could
		// not kill b mid-file on a fast machine.
		proxy := petreltest.NewProxy(t, cl.listen("b"), petreltest.Pace(8<<20, 0))
		cPath := cl.configPath("c")
		cConf, err := os.ReadFile(cPath)
		if err != nil {
			t.Fatal(err)
		}
		paced := strings.ReplaceAll(string(cConf), cl.connector("b"), "tcp://"+proxy.Addr())
		if paced == string(cConf) {
			t.Fatalf("c's configuration names no connector %s for b", cl.connector("b"))
		}
		if err := os.WriteFile(cPath, []byte(paced), 0o600); err != nil {
			t.Fatal(err)
		}
	})

	// Kill c while it receives from a.
	resentA, missingA := cl.killDuring(t, "c", "a", size)
	// Kill b while it receives from c.
	resentC, missingC := cl.killDuring(t, "b", "c", size)
	t.Logf("a->c: sent %d after the kill for %d missing; c->b: sent %d for %d missing", resentA, missingA, resentC, missingC)
	for _, hop := range []struct {
		name            string
		resent, missing int64
	}{{"a->c", resentA, missingA}, {"c->b", resentC, missingC}} {
		// A kill loses what was written and not yet synced: at most
		// sync_bytes, plus the chunks on the wire.
		if hop.resent > hop.missing+hop.missing/10 {
			t.Errorf("%s: sent %d bytes after the kill for %d missing: more than 10%% over", hop.name, hop.resent, hop.missing)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitQueueDepth(ctx, t, cl.dataDir("b"), "crash", 1)
	cl.stopAll()
	checkOneFile(ctx, t, cl.dataDir("b"), sum, func(p string) string { return p })
}

// sendFileAcross runs a -> c (relay) -> b as petrel processes with small
// chunks and syncs (so that what a kill loses is small next to the file),
// lets prepare change their configurations before they start, and sends
// a random file of size bytes from a to crash@b without waiting. It
// returns the cluster and the file's SHA-256.
func sendFileAcross(t *testing.T, size int64, prepare func(cl *crashCluster)) (*crashCluster, string) {
	t.Helper()
	files := "files:\n  chunk_size: 64KiB\n  window: 32\n  sync_bytes: 1MiB\n"
	cl := newCrashCluster(t, crashPlan{})
	for _, name := range []string{"a", "b", "c"} {
		if err := appendFile(cl.configPath(name), files); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(cl)
	}
	for _, name := range []string{"b", "c", "a"} {
		cl.startNode(name)
	}
	_, sum := sendRandomFile(t, cl.configPath("a"), size)
	return cl, sum
}

// sendRandomFile writes a file of size random bytes and has `petrel
// sendfile --no-wait` send it to crash@b from the node of config; it
// returns the file's path and SHA-256, which sendfile must have answered.
func sendRandomFile(t *testing.T, config string, size int64) (src, sum string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "big.bin")
	sum = writeRandomFile(t, src, size)
	r := runPetrel(t, time.Minute, "sendfile", src, "crash@b", "-c", config, "--no-wait", "--json")
	r.wantCode(t, 0)
	var sent adminapi.SendFileResponse
	if err := json.Unmarshal([]byte(r.stdout), &sent); err != nil || sent.SHA256 != sum {
		t.Fatalf("sendfile answered %q (%v)", r.stdout, err)
	}
	return src, sum
}

// checkOneFile opens the store in dataDir in process and checks that its
// crash queue holds exactly one file message, whose file (at where(its
// path)) has the SHA-256 sum, alone in its received folder.
func checkOneFile(ctx context.Context, t *testing.T, dataDir, sum string, where func(string) string) {
	t.Helper()
	n, err := petrel.Open(ctx, petrel.Config{Name: "b", DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := n.Consumer("crash")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Poll()
	if err != nil {
		t.Fatalf("no file message at b: %v", err)
	}
	received := where(d.File.ReceivedFilePath)
	if got := sha256File(t, received); got != sum {
		t.Fatalf("b's file has SHA-256 %s, the source %s", got, sum)
	}
	d.Ack()
	if d2, err := c.Poll(); err == nil {
		t.Fatalf("a second file message at b: %+v", d2.File)
	}
	ents, _ := os.ReadDir(filepath.Dir(received))
	if len(ents) != 1 {
		t.Fatalf("b's received folder holds %d files, want 1", len(ents))
	}
}

// startNode starts `petrel node -c` for name (a included: it sends from
// its own node here) and waits until it is ready.
func (cl *crashCluster) startNode(name string) {
	cl.t.Helper()
	p, err := nodeproc.Start(cl.ctx, name, petrelBin, filepath.Join(cl.dir, name+".stderr"), "node", "-c", cl.configPath(name))
	if err != nil {
		cl.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(cl.ctx, time.Minute)
	defer cancel()
	if _, err := p.WaitReady(ctx); err != nil {
		cl.t.Fatalf("start %s: %v", name, err)
	}
	cl.procs[name] = p
}

// killDuring waits until victim holds between a quarter and three
// quarters of the file, kills it, restarts it, and waits for the file to
// be past it. It returns the bytes sender put on the wire after the kill
// and what victim did not hold durably at the kill.
func (cl *crashCluster) killDuring(t *testing.T, victim, sender string, size int64) (resent, missing int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var held int64
	for held < size/4 {
		st, err := readNodeStatus(ctx, "", "", cl.dataDir(victim), "")
		if err == nil {
			for _, tr := range st.Transfers {
				held = max(held, tr.Offset)
			}
		}
		if held >= size*3/4 {
			t.Fatalf("%s got %d of %d bytes before the test could kill it", victim, held, size)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never held a quarter of the file: %v", victim, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wire := fileWireOf(ctx, t, cl.dataDir(sender))
	cl.procs[victim].Kill()
	missing = size - held
	cl.startNode(victim)
	// Done with this hop once the sender has nothing left for it.
	if err := waitLinksEmpty(ctx, cl.dataDir(sender)); err != nil {
		t.Fatal(err)
	}
	return fileWireOf(ctx, t, cl.dataDir(sender)) - wire, missing
}

func fileWireOf(ctx context.Context, t *testing.T, dataDir string) int64 {
	t.Helper()
	st, err := readNodeStatus(ctx, "", "", dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	var w int64
	for _, l := range st.Links {
		w += l.Files.Wire
	}
	return w
}

func waitQueueDepth(ctx context.Context, t *testing.T, dataDir, queue string, depth int64) {
	t.Helper()
	for {
		st, err := readNodeStatus(ctx, "", "", dataDir, "")
		if err == nil {
			for _, q := range st.Queues {
				if q.Name == queue && q.Depth == depth {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("queue %s never reached depth %d: %v (%v)", queue, depth, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeRandomFile(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(fmt.Errorf("read received file: %w", err))
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(fmt.Errorf("read received file: %w", err))
	}
	return hex.EncodeToString(h.Sum(nil))
}

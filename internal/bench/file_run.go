package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// FileAddr is the address the bench file goes to: received at b, relayed
// by c.
const FileAddr = "files"

// copyBuf is the buffer of the source writer and of the baseline copy.
const copyBuf = 1 << 20

// fileBench is one `bench file`: the source file, then --runs rounds of
// baseline copy and transfer.
type fileBench struct {
	o        FileOptions
	exe, dir string
	progress io.Writer
	// life kills the nodes when it ends, a safety net: each round stops
	// its nodes first, cleanly, whatever happened.
	life context.Context
}

func (fb *fileBench) run(ctx context.Context) (*fileResult, error) {
	res := newFileResult(fb.o)
	size := int64(fb.o.SizeMiB) << 20
	src := filepath.Join(fb.dir, "src", fmt.Sprintf("petrel-bench-%dMiB.bin", fb.o.SizeMiB))
	fmt.Fprintf(fb.progress, "writing %d MiB of random bytes to %s...\n", fb.o.SizeMiB, src)
	sum, err := writeBenchFile(ctx, src, size)
	if err != nil {
		return nil, err
	}
	res.SHA256 = sum
	for i := range fb.o.Runs {
		var rd fileRound
		if fb.o.Runs > 1 {
			fmt.Fprintf(fb.progress, "round %d of %d\n", i+1, fb.o.Runs)
		}
		if !fb.o.NoBaseline {
			fmt.Fprintf(fb.progress, "baseline: copying it over one loopback TCP connection, twice...\n")
			d, fsync, err := fasterCopy(ctx, src, filepath.Join(fb.dir, "baseline.bin"), size)
			if err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
			rd.BaselineSeconds, rd.BaselineFsyncSeconds = d.Seconds(), fsync.Seconds()
		}
		dir := filepath.Join(fb.dir, fmt.Sprintf("run-%d", i+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		fr := &fileRun{fb: fb, nodes: newProcRun(fb.life, fb.exe, dir, "full", fb.progress), sum: sum}
		if err := fr.run(ctx, src, size, sum, &rd, res); err != nil {
			return nil, err
		}
		if !fb.o.Keep {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
		res.Runs = append(res.Runs, rd.rounded(fb.o.SizeMiB))
	}
	res.summarize()
	return res, nil
}

// fileRun is one transfer of `bench file`. Its nodes are a, which
// sends, b, which receives, and c, which relays with --hops 2.
type fileRun struct {
	fb    *fileBench
	nodes *procRun
	sum   string // the file's SHA-256
}

// run moves the file and checks what b placed. It fills round's times
// and res's memory figures.
func (r *fileRun) run(ctx context.Context, src string, size int64, sum string, round *fileRound, res *fileResult) error {
	ctx, died := context.WithCancelCause(ctx)
	defer died(nil)
	r.nodes.died = died
	got, err := r.transfer(ctx, src, round, res)
	if err != nil {
		return err
	}
	// The nodes are stopped; what b placed is still in the directory.
	if got.SHA256 != sum || got.Size != size {
		return fmt.Errorf("b's file message announces %d bytes with SHA-256 %s; %d bytes with %s were sent", got.Size, got.SHA256, size, sum)
	}
	fmt.Fprintf(r.nodes.progress, "checking the SHA-256 of %s...\n", got.Path)
	placed, n, err := fileSHA256(ctx, got.Path)
	if err != nil {
		return fmt.Errorf("check the file placed at b: %w", err)
	}
	if placed != sum || n != size {
		return fmt.Errorf("the file placed at b, %s, has %d bytes with SHA-256 %s; %d bytes with %s were sent", got.Path, n, placed, size, sum)
	}
	return nil
}

// transfer starts the nodes, has a send the file, waits for b to receive
// it and takes the figures. Every node is stopped before it returns.
func (r *fileRun) transfer(ctx context.Context, src string, round *fileRound, res *fileResult) (got receivedFileEvent, err error) {
	defer func() {
		if serr := r.nodes.stopAll(err != nil); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop the nodes: %w", serr))
		}
	}()
	b, bInfo, err := r.nodes.startListening(ctx, "b", 0, func(listen string) ([]string, error) {
		cfg, err := r.config(nodeproc.NodeFile{Name: "b", Listen: listen, Receive: []string{FileAddr}})
		return []string{"bench", "agent", "recvfile", "-c", cfg, "--from", FileAddr}, err
	})
	if err != nil {
		return got, err
	}
	hop := bInfo.Listen
	if r.fb.o.Hops == 2 {
		_, cInfo, err := r.nodes.startListening(ctx, "c", 0, func(listen string) ([]string, error) {
			cfg, err := r.config(nodeproc.NodeFile{Name: "c", Listen: listen,
				Nodes: [][2]string{{"b", "tcp://" + hop}}, Relay: []string{FileAddr}})
			return []string{"node", "-c", cfg}, err
		})
		if err != nil {
			return got, err
		}
		hop = cInfo.Listen
	}
	f := nodeproc.NodeFile{Name: "a", Nodes: [][2]string{{"b", "tcp://" + hop}}}
	if r.fb.o.Hops == 2 {
		f.Nodes = [][2]string{{"c", "tcp://" + hop}}
		f.Routes = [][2]string{{"b", "c"}}
	}
	cfg, err := r.config(f)
	if err != nil {
		return got, err
	}
	args := []string{"bench", "agent", "sendfile", "-c", cfg, "--to", FileAddr + "@b", "--file", src}
	if r.fb.o.KnownChecksum {
		args = append(args, "--sha256", r.sum)
	}
	a, _, err := r.nodes.start(ctx, "a", args...)
	if err != nil {
		return got, err
	}
	fmt.Fprintf(r.nodes.progress, "sending %d MiB from a to %s@b...\n", r.fb.o.SizeMiB, FileAddr)
	var sent sentFileEvent
	if err := a.WaitEvent(ctx, "sent", &sent); err != nil {
		return got, err
	}
	if err := b.WaitEvent(ctx, "received", &got); err != nil {
		return got, err
	}
	var handed handedFileEvent
	if err := a.WaitEvent(ctx, "handed", &handed); err != nil {
		return got, err
	}
	round.Seconds = time.Duration(got.ReceivedNs - sent.StartNs).Seconds()
	round.SendSeconds = time.Duration(sent.SentNs - sent.StartNs).Seconds()
	round.HandedSeconds = time.Duration(handed.HandedNs - sent.StartNs).Seconds()
	for name, v := range r.nodes.rss(map[string]float64{"a": handed.PeakRSSMB, "b": got.PeakRSSMB}) {
		res.RSSMB[name] = max(res.RSSMB[name], v)
		res.PeakRSSMB = max(res.PeakRSSMB, v)
	}
	clear(res.Pids)
	for name, p := range r.nodes.procs {
		res.Pids[name] = p.Pid()
	}
	return got, nil
}

// config writes the configuration of node f.Name as every bench does, with
// the files section of the flags.
func (r *fileRun) config(f nodeproc.NodeFile) (string, error) {
	f.Extra = r.fb.o.filesSection()
	return r.nodes.fileFor(f)
}

// filesSection is the YAML of the flags that tune the nodes' files
// section, "" when every one keeps its default.
func (o FileOptions) filesSection() string {
	var b strings.Builder
	for _, c := range []struct {
		key string
		v   int64
	}{{"chunk_size", int64(o.ChunkKiB) << 10}, {"window", int64(o.Window)},
		{"sync_bytes", int64(o.SyncKiB) << 10}, {"concurrency", int64(o.Concurrency)}} {
		if c.v > 0 {
			fmt.Fprintf(&b, "  %s: %d\n", c.key, c.v)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "files:\n" + b.String()
}

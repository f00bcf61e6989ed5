package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchFileAddr is the address the bench file goes to: received at b, relayed
// by c.
const benchFileAddr = "files"

// benchCopyBuf is the buffer of the source writer and of the baseline copy.
const benchCopyBuf = 1 << 20

// fileBench is one `bench file`: the source file, then --runs rounds of
// baseline copy and transfer.
type fileBench struct {
	o        fileOptions
	exe, dir string
	progress io.Writer
	// life kills the nodes when it ends, a safety net: each round stops
	// its nodes first, cleanly, whatever happened.
	life context.Context
}

func (fb *fileBench) run(ctx context.Context) (*fileResult, error) {
	res := newFileResult(fb.o)
	size := int64(fb.o.sizeMiB) << 20
	src := filepath.Join(fb.dir, "src", fmt.Sprintf("petrel-bench-%dMiB.bin", fb.o.sizeMiB))
	fmt.Fprintf(fb.progress, "writing %d MiB of random bytes to %s...\n", fb.o.sizeMiB, src)
	sum, err := writeBenchFile(ctx, src, size)
	if err != nil {
		return nil, err
	}
	res.SHA256 = sum
	for i := range fb.o.runs {
		var rd fileRound
		if fb.o.runs > 1 {
			fmt.Fprintf(fb.progress, "round %d of %d\n", i+1, fb.o.runs)
		}
		if !fb.o.noBaseline {
			// The faster of two copies: it is a ceiling, and the first
			// one may pay for memory the machine had not used yet (page
			// cache of a file that size), as the source file did.
			fmt.Fprintf(fb.progress, "baseline: copying it over one loopback TCP connection, twice...\n")
			for range 2 {
				d, fsync, err := benchBaselineCopy(ctx, src, filepath.Join(fb.dir, "baseline.bin"), size)
				if err != nil {
					return nil, fmt.Errorf("baseline: %w", err)
				}
				if rd.BaselineSeconds == 0 || d.Seconds() < rd.BaselineSeconds {
					rd.BaselineSeconds, rd.BaselineFsyncSeconds = d.Seconds(), fsync.Seconds()
				}
			}
		}
		dir := filepath.Join(fb.dir, fmt.Sprintf("run-%d", i+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		fr := &fileRun{fb: fb, link: &linkRun{o: linkOptions{hops: fb.o.hops, sync: "full"}, exe: fb.exe, dir: dir,
			progress: fb.progress, procs: map[string]*proc{}, life: fb.life}}
		if err := fr.run(ctx, src, size, sum, &rd, res); err != nil {
			return nil, err
		}
		if !fb.o.keep {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
		res.Runs = append(res.Runs, rd.rounded(fb.o.sizeMiB))
	}
	res.summarize()
	return res, nil
}

// fileRun is one transfer of `bench file`. Its nodes are run as bench
// link runs them (link): a sends, b receives, c relays with --hops 2.
type fileRun struct {
	fb   *fileBench
	link *linkRun
}

// run moves the file and checks what b placed. It fills round's times
// and res's memory figures.
func (r *fileRun) run(ctx context.Context, src string, size int64, sum string, round *fileRound, res *fileResult) error {
	ctx, died := context.WithCancelCause(ctx)
	defer died(nil)
	r.link.died = died
	got, err := r.transfer(ctx, src, round, res)
	if err != nil {
		return err
	}
	// The nodes are stopped; what b placed is still in the directory.
	if got.SHA256 != sum || got.Size != size {
		return fmt.Errorf("b's file message announces %d bytes with SHA-256 %s; %d bytes with %s were sent", got.Size, got.SHA256, size, sum)
	}
	fmt.Fprintf(r.link.progress, "checking the SHA-256 of %s...\n", got.Path)
	placed, n, err := benchFileSHA256(ctx, got.Path)
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
		if serr := r.link.stopAll(err != nil); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop the nodes: %w", serr))
		}
	}()
	b, bInfo, err := r.link.startListening(ctx, "b", 0, func(listen string) ([]string, error) {
		cfg, err := r.config(nodeFile{Name: "b", Listen: listen, Receive: []string{benchFileAddr}})
		return []string{"bench", "agent", "recvfile", "-c", cfg, "--from", benchFileAddr}, err
	})
	if err != nil {
		return got, err
	}
	hop := bInfo.Listen
	if r.fb.o.hops == 2 {
		_, cInfo, err := r.link.startListening(ctx, "c", 0, func(listen string) ([]string, error) {
			cfg, err := r.config(nodeFile{Name: "c", Listen: listen,
				Nodes: [][2]string{{"b", "tcp://" + hop}}, Relay: []string{benchFileAddr}})
			return []string{"node", "-c", cfg}, err
		})
		if err != nil {
			return got, err
		}
		hop = cInfo.Listen
	}
	f := nodeFile{Name: "a", Nodes: [][2]string{{"b", "tcp://" + hop}}}
	if r.fb.o.hops == 2 {
		f.Nodes = [][2]string{{"c", "tcp://" + hop}}
		f.Routes = [][2]string{{"b", "c"}}
	}
	cfg, err := r.config(f)
	if err != nil {
		return got, err
	}
	a, _, err := r.link.start(ctx, "a", "bench", "agent", "sendfile", "-c", cfg, "--to", benchFileAddr+"@b", "--file", src)
	if err != nil {
		return got, err
	}
	fmt.Fprintf(r.link.progress, "sending %d MiB from a to %s@b...\n", r.fb.o.sizeMiB, benchFileAddr)
	var sent sentFileEvent
	if err := a.waitEvent(ctx, "sent", &sent); err != nil {
		return got, err
	}
	if err := b.waitEvent(ctx, "received", &got); err != nil {
		return got, err
	}
	var handed handedFileEvent
	if err := a.waitEvent(ctx, "handed", &handed); err != nil {
		return got, err
	}
	round.Seconds = time.Duration(got.ReceivedNs - sent.StartNs).Seconds()
	round.SendSeconds = time.Duration(sent.SentNs - sent.StartNs).Seconds()
	round.HandedSeconds = time.Duration(handed.HandedNs - sent.StartNs).Seconds()
	for name, v := range r.link.rss(map[string]float64{"a": handed.PeakRSSMB, "b": got.PeakRSSMB}) {
		res.RSSMB[name] = max(res.RSSMB[name], v)
		res.PeakRSSMB = max(res.PeakRSSMB, v)
	}
	clear(res.Pids)
	for name, p := range r.link.procs {
		res.Pids[name] = p.Pid()
	}
	return got, nil
}

// config writes the configuration of node f.Name as bench link does, with
// the files section of the flags.
func (r *fileRun) config(f nodeFile) (string, error) {
	f.Extra = r.fb.o.filesSection()
	return r.link.fileFor(f)
}

// filesSection is the YAML of the flags that tune the nodes' files
// section, "" when every one keeps its default.
func (o fileOptions) filesSection() string {
	var b strings.Builder
	for _, c := range []struct {
		key string
		v   int64
	}{{"chunk_size", int64(o.chunkKiB) << 10}, {"window", int64(o.window)},
		{"sync_bytes", int64(o.syncKiB) << 10}, {"concurrency", int64(o.concurrency)}} {
		if c.v > 0 {
			fmt.Fprintf(&b, "  %s: %d\n", c.key, c.v)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "files:\n" + b.String()
}

// writeBenchFile writes size random bytes to path, synced, and returns
// their SHA-256.
func writeBenchFile(ctx context.Context, path string, size int64) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var seed [32]byte
	crand.Read(seed[:])
	rng := rand.NewChaCha8(seed)
	h := sha256.New()
	buf := make([]byte, benchCopyBuf)
	for left := size; left > 0; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		p := buf[:min(int64(len(buf)), left)]
		rng.Read(p)
		h.Write(p)
		if _, err := f.Write(p); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		left -= int64(len(p))
	}
	// Synced, so that its writeback does not run during the measures.
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), f.Close()
}

// hashFile returns the SHA-256 and the length of the file at path.
func benchFileSHA256(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, benchCtxReader{ctx, f}, make([]byte, benchCopyBuf))
	if err != nil {
		return "", n, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// benchCtxReader stops reading once ctx is done.
type benchCtxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c benchCtxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// benchBaselineCopy copies src to dst over one TCP connection on loopback, as
// plainly as can be: one goroutine reads src into a 1 MiB buffer and
// writes it to the connection, the other reads the connection into a
// 1 MiB buffer and writes it to dst, which it fsyncs at the end. No
// sendfile or splice: the bytes go through user space, as petrel's do.
// It returns the time from the dial to dst synced and closed, and that of
// the fsync alone, and removes dst.
func benchBaselineCopy(ctx context.Context, src, dst string, size int64) (total, fsync time.Duration, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	defer os.Remove(dst)
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()

	type result struct {
		n     int64
		fsync time.Duration
		err   error
	}
	recvd := make(chan result, 1)
	conns := make(chan net.Conn, 2) // closed on ctx's end, to unblock both
	stopWatch := context.AfterFunc(ctx, func() {
		ln.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})
	defer stopWatch()

	start := time.Now()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvd <- result{err: err}
			return
		}
		conns <- c
		defer c.Close()
		n, err := benchCopyPlain(out, c, make([]byte, benchCopyBuf))
		synced := time.Now()
		if err == nil {
			err = out.Sync()
		}
		if err == nil {
			err = out.Close()
		}
		recvd <- result{n, time.Since(synced), err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, 0, err
	}
	conns <- c
	_, serr := benchCopyPlain(c, in, make([]byte, benchCopyBuf))
	if serr == nil {
		serr = c.(*net.TCPConn).CloseWrite()
	}
	if serr != nil {
		c.Close() // the receiver sees the end
	}
	rr := <-recvd
	elapsed := time.Since(start)
	c.Close()
	if err := errors.Join(serr, rr.err, ctx.Err()); err != nil {
		return 0, 0, err
	}
	if rr.n != size {
		return 0, 0, fmt.Errorf("copied %d bytes of %d", rr.n, size)
	}
	return elapsed, rr.fsync, nil
}

// benchCopyPlain is io.CopyBuffer without its shortcuts (ReaderFrom,
// WriterTo), which would hand the copy to sendfile or splice.
func benchCopyPlain(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			if _, err := dst.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

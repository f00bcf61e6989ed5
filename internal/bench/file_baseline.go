package bench

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
	"time"
)

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
	buf := make([]byte, copyBuf)
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

// fileSHA256 returns the SHA-256 and the length of the file at path.
func fileSHA256(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxReader{ctx, f}, make([]byte, copyBuf))
	if err != nil {
		return "", n, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// baselineCopy copies src to dst over one TCP connection on loopback, as
// plainly as can be: one goroutine reads src into a 1 MiB buffer and
// writes it to the connection, the other reads the connection into a
// 1 MiB buffer and writes it to dst, which it fsyncs at the end. No
// sendfile or splice: the bytes go through user space, as petrel's do.
// It returns the time from the dial to dst synced and closed, and that of
// the fsync alone, and removes dst.
func baselineCopy(ctx context.Context, src, dst string, size int64) (total, fsync time.Duration, err error) {
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
		n, err := copyPlain(out, c, make([]byte, copyBuf))
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
	_, serr := copyPlain(c, in, make([]byte, copyBuf))
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

// fasterCopy runs baselineCopy twice and returns the faster copy's times.
// The faster, because the baseline is a ceiling, and the first copy may
// pay for memory the machine had not used yet (page cache of a file that
// size), as writing the source file did.
func fasterCopy(ctx context.Context, src, dst string, size int64) (total, fsync time.Duration, err error) {
	for range 2 {
		d, f, err := baselineCopy(ctx, src, dst, size)
		if err != nil {
			return 0, 0, err
		}
		if total == 0 || d < total {
			total, fsync = d, f
		}
	}
	return total, fsync, nil
}

// copyPlain is io.CopyBuffer without its shortcuts (ReaderFrom,
// WriterTo), which would hand the copy to sendfile or splice.
func copyPlain(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
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

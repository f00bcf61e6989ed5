package filetransfer

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// Follower reads a transfer's partial file while it is still being
// received, never past the durable offset: what a relay forwards before it
// holds the whole file (cut-through) is only what would survive its crash,
// so the next hop never holds bytes the relay could lose. It reads through
// its own descriptor, opened when it is made, so it goes on reading after
// the transfer is delivered and its spool name removed.
//
// The bytes it has read leave the page cache: the file is written through
// the page cache while it is followed, and without that a relay would hold
// a whole file's worth of pages, each taken fresh (see dropCached).
//
// ReadChunk blocks until the bytes it is asked for are durable, the
// transfer ends short of them (ErrUnfinished), or Close is called. It is
// meant for one goroutine; Close may be called from any.
type Follower struct {
	in   *Incoming
	f    *os.File
	once sync.Once
	stop chan struct{}
}

// Follow opens a Follower of the transfer. It fails once the Incoming is
// closed.
func (in *Incoming) Follow() (*Follower, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.usable(); err != nil {
		return nil, err
	}
	// A follower reads what was just written: through the page cache, it
	// finds it there rather than on the disk.
	if err := in.bufferWrites(); err != nil {
		return nil, fmt.Errorf("follow transfer %s: %w", in.id, err)
	}
	f, err := os.Open(in.partPath)
	if err != nil {
		return nil, fmt.Errorf("follow transfer %s: %w", in.id, err)
	}
	return &Follower{in: in, f: f, stop: make(chan struct{})}, nil
}

// Info returns the file the followed transfer receives.
func (fo *Follower) Info() Info { return fo.in.Info() }

// ReadChunk reads up to len(buf) durable bytes at offset, waiting for
// them. It returns 0, io.EOF at the file's size.
func (fo *Follower) ReadChunk(offset int64, buf []byte) (int, error) {
	size := fo.in.info.Size
	if offset < 0 || offset > size {
		return 0, fmt.Errorf("follow transfer %s at %d: the file has %d bytes: %w", fo.in.id, offset, size, ErrOffset)
	}
	if offset == size {
		return 0, io.EOF
	}
	for {
		durable, ended, moved := fo.in.progress()
		if offset < durable {
			if rest := durable - offset; int64(len(buf)) > rest {
				buf = buf[:rest]
			}
			n, err := fo.f.ReadAt(buf, offset)
			if err != nil && !(err == io.EOF && n == len(buf)) {
				return n, fmt.Errorf("follow transfer %s: read at %d: %w", fo.in.id, offset, err)
			}
			// Read once, and durable: its pages are not needed again
			// (a resend reads the disk), and the writes still to come
			// reuse them rather than take fresh ones (see dropCached).
			dropCached(fo.f, offset, int64(n))
			return n, nil
		}
		if ended {
			return 0, fo.in.endedShort(fmt.Sprintf("at %d (durable %d)", offset, durable))
		}
		select {
		case <-moved:
		case <-fo.stop:
			return 0, fmt.Errorf("follow transfer %s: %w", fo.in.id, ErrClosed)
		}
	}
}

// Checksum returns the SHA-256 of the followed file, waiting until the
// transfer has it and the whole file is durable: at once for a file
// announced with its checksum, once it is delivered for one whose checksum
// followed (the last bytes become durable only after the checksum matched,
// see Incoming.sync). A relay forwarding such a file early sends this, the
// checksum it verified itself, after the last byte. It fails with
// ErrUnfinished when the transfer ends short, ErrClosed on Close, and
// ctx's error.
func (fo *Follower) Checksum(ctx context.Context) (string, error) {
	for {
		durable, ended, moved := fo.in.progress()
		info := fo.in.Info()
		if durable == info.Size && info.SHA256 != "" {
			sum := info.SHA256
			return sum, nil
		}
		if ended {
			return "", fo.in.endedShort(fmt.Sprintf("the checksum at %d (durable %d)", fo.in.info.Size, durable))
		}
		select {
		case <-moved:
		case <-fo.stop:
			return "", fmt.Errorf("follow transfer %s: %w", fo.in.id, ErrClosed)
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// Verify is a no-op: the bytes a Follower reads are the ones the spool
// holds, and the next hop's SHA-256 check is what judges them. It makes a
// Follower usable where a Source is.
func (fo *Follower) Verify() error { return nil }

// Close ends a ReadChunk waiting in another goroutine and closes the
// descriptor.
func (fo *Follower) Close() error {
	var err error
	fo.once.Do(func() {
		close(fo.stop)
		err = fo.f.Close()
	})
	return err
}

// endedShort is the error of a follower whose transfer ended before what
// it waits for (where): ErrAborted when the sender gave the file up, so
// that the next hop is told to drop its part too; ErrUnfinished otherwise
// (a cut session, a stop), after which the next hop keeps its part.
func (in *Incoming) endedShort(where string) error {
	in.mu.Lock()
	reason := in.aborted
	in.mu.Unlock()
	if reason != "" {
		return fmt.Errorf("follow transfer %s %s: %w: %s", in.id, where, ErrAborted, reason)
	}
	return fmt.Errorf("follow transfer %s %s: %w", in.id, where, ErrUnfinished)
}

// progress returns the durable offset, whether the Incoming has ended
// (no offset will move any more) and a channel closed at the next move.
func (in *Incoming) progress() (durable int64, ended bool, moved <-chan struct{}) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.moved == nil {
		in.moved = make(chan struct{})
	}
	return in.durable, in.closed || in.broken != nil, in.moved
}

// advanced wakes the followers: the durable offset moved, or the Incoming
// ended. in.mu is held.
func (in *Incoming) advanced() {
	if in.moved != nil {
		close(in.moved)
		in.moved = nil
	}
}

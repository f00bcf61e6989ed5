package filetransfer

import (
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"sync"
	"syscall"

	"github.com/petrelmq/petrel/internal/logkey"
)

// Incoming is one file being received into the spool. Chunks are appended
// in order with Write; Sync makes them durable; Complete verifies the file
// and delivers it; Abort drops it; Close leaves it in the spool to resume.
//
// It keeps two offsets. The end is where the next Write must start: every
// byte written so far. The durable offset (Offset) is the end at the last
// successful Sync: those bytes survive a crash, and only those may be
// acknowledged to the sender. After any failed Write or Sync the end goes
// back to the durable offset, the bytes past it are dropped and the
// running checksum is restored, so the rule for the caller is one: after
// an error, the sender resumes at Offset.
//
// All methods are safe for concurrent use; Write is meant to be called in
// order by the one goroutine that receives the transfer's chunks.
type Incoming struct {
	id        string
	info      Info
	dir       string // the spool directory
	partPath  string
	statePath string
	log       *slog.Logger
	release   func() // gives the id back to the Spool

	mu          sync.Mutex
	f           *os.File // write-only: a resume never reads the partial file
	h           hash.Hash
	end         int64
	durable     int64
	durableHash []byte // h's state at durable, to roll back to
	closed      bool
	bg          *bgHash // hashes h beside the writes; nil once closed
	kicked      int64   // end of the range last handed to writeback
	// direct is set while the partial file is written with O_DIRECT (see
	// writeAt); stage is the aligned buffer a chunk is copied into first
	// when its own is not aligned.
	direct    bool
	stage     []byte
	broken    error         // set when a rollback failed: only Close and Abort work
	aborted   string        // Abort's reason, for the followers
	delivered string        // where Deliver placed the file
	moved     chan struct{} // closed when durable moves or the Incoming ends (see Follow)
}

// ID returns the transfer id.
func (in *Incoming) ID() string { return in.id }

// Info returns the file this transfer receives. Its SHA256 is empty while
// the checksum follows, until SetChecksum.
func (in *Incoming) Info() Info {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.info
}

// Offset returns the durable offset: every byte before it is on disk and
// recorded in the state, so it survives a crash. It is where the sender
// must resume. A receiver answering a sender that (re)connects calls Sync
// first, so that Offset covers everything written.
func (in *Incoming) Offset() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.durable
}

// Written returns the end: every byte written, synced or not. It is the
// offset the next Write must give, and a progress figure.
func (in *Incoming) Written() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.end
}

// Write appends p, which must start at offset == Written (else ErrOffset,
// with both offsets) and must not go past Info.Size (else ErrOverrun). The
// bytes are not durable until Sync. p is hashed in the background: it must
// not change until the next Sync, Deliver or Close returns. When the filesystem is full the error
// wraps ErrSpoolFull; then, as after any error, the transfer is back at
// its durable offset (see Incoming).
func (in *Incoming) Write(offset int64, p []byte) error {
	return in.WriteThen(offset, p, nil)
}

// WriteThen is Write, which then calls done (if not nil) once p is no
// longer used: hashed, or refused. The caller may then reuse p's buffer.
// done runs on another goroutine, possibly before WriteThen returns.
func (in *Incoming) WriteThen(offset int64, p []byte, done func()) (err error) {
	defer func() {
		if err != nil && done != nil {
			done()
		}
	}()
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.usable(); err != nil {
		return err
	}
	if offset != in.end {
		return fmt.Errorf("transfer %s: chunk at %d, but the transfer is at %d: %w", in.id, offset, in.end, ErrOffset)
	}
	if in.end+int64(len(p)) > in.info.Size {
		return fmt.Errorf("transfer %s: %d bytes at %d go past the announced size %d: %w",
			in.id, len(p), offset, in.info.Size, ErrOverrun)
	}
	if err := in.writeAt(p); err != nil {
		in.rollback()
		return ioError(fmt.Sprintf("transfer %s: write %d bytes at %d", in.id, len(p), offset), err)
	}
	in.bg.add(p, done)
	in.end += int64(len(p))
	if !in.direct && in.end-in.kicked >= writebackBytes {
		startWriteback(in.f, in.kicked, in.end-in.kicked)
		in.kicked = in.end
	}
	return nil
}

// writeAt writes p at the end. The partial file is written with O_DIRECT
// while the chunks allow it (offsets and lengths that are multiples of
// 4 KiB: every chunk but a file's last, at the default chunk size), so
// that its bytes go to the disk without a copy in the page cache: on a
// virtual machine that hands freed memory back to its host, the kernel
// spent 1.7 s of CPU per GiB getting pages for that copy, three times the
// direct write's wall time. A chunk whose buffer is not aligned (a Data
// frame's message starts 8 bytes into it) is copied into an aligned one
// first, which costs a tenth of that, up to stageMax. A chunk that does
// not fit turns O_DIRECT off for the rest of the file, which is then
// written through the page cache as before. Direct or not, the bytes are
// durable only after Sync.
func (in *Incoming) writeAt(p []byte) error {
	if in.direct && (!directFits(len(p), in.end) || len(p) > stageMax && !aligned(p)) {
		if err := in.bufferWrites(); err != nil {
			return err
		}
	}
	w := p
	if in.direct && !aligned(p) {
		if len(in.stage) < len(p) {
			in.stage = alignedBuffer(len(p))
		}
		w = in.stage[:copy(in.stage, p)]
	}
	_, err := in.f.WriteAt(w, in.end)
	if err != nil && in.direct && errors.Is(err, syscall.EINVAL) {
		// The filesystem took the flag but not the write (a larger
		// sector, say): the rest of the file goes through the page cache.
		if err := in.bufferWrites(); err != nil {
			return err
		}
		_, err = in.f.WriteAt(p, in.end)
	}
	return err
}

// stageMax bounds the staging buffer, which a peer's chunk size sets: an
// unaligned chunk larger than this (the default is 512 KiB) turns
// O_DIRECT off rather than grow it.
const stageMax = 1 << 20

// bufferWrites turns O_DIRECT off: the writes that follow go through the
// page cache, and their writeback is started every writebackBytes.
func (in *Incoming) bufferWrites() error {
	if !in.direct {
		return nil
	}
	in.direct, in.stage = false, nil
	in.kicked = in.end
	if setDirect(in.f, false) {
		return nil
	}
	// The flag would not clear: the file is opened again without it.
	// Nothing is lost, since O_DIRECT left nothing in the page cache.
	f, err := os.OpenFile(in.partPath, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	in.f.Close()
	in.f = f
	return nil
}

// writebackBytes is how much is written before its writeback is started.
const writebackBytes = 1 << 20

// Sync makes every byte written durable, and Offset with it: it fsyncs the
// partial file, then records the new offset and the running checksum in
// the state (temp file, fsync, rename). A later Begin resumes at the last
// Offset that a Sync recorded.
// On error (ErrSpoolFull when the filesystem is full) the transfer is back
// at its durable offset, which has not moved.
func (in *Incoming) Sync() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.usable(); err != nil {
		return err
	}
	return in.sync(false)
}

// sync makes the bytes written durable, and the state that says so, its
// rename included. final syncs even when nothing was written since, as
// delivery needs (see Deliver).
func (in *Incoming) sync(final bool) error {
	if in.end == in.durable && !final {
		return nil
	}
	if !final && in.end == in.info.Size && in.info.Pending() {
		// The whole file, but not yet its checksum: a durable offset of
		// the size would make a later session ack the size, which passes
		// custody, for a file never verified. These last bytes become
		// durable in Deliver, once the checksum is known and matched.
		return nil
	}
	if err := in.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages:
		// what the file holds past the durable offset is unknown.
		in.rollback()
		return ioError("transfer "+in.id+": sync data", err)
	}
	in.bg.wait()
	hs, err := in.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err == nil {
		err = writeState(in.statePath, in.info, in.end, hs)
	}
	if err != nil {
		in.rollback()
		return ioError("transfer "+in.id+": sync state", err)
	}
	in.durable, in.durableHash = in.end, hs
	in.advanced()
	return nil
}

// rollback puts the transfer back at its durable offset: the partial file
// is cut there and the checksum restored. If that fails too, the Incoming
// is broken; Close it and Begin again, which resumes from the state file.
func (in *Incoming) rollback() {
	in.bg.wait()
	err := in.f.Truncate(in.durable)
	if err == nil {
		err = in.h.(encoding.BinaryUnmarshaler).UnmarshalBinary(in.durableHash)
	}
	if err != nil {
		in.broken = fmt.Errorf("transfer %s: cannot go back to offset %d (%v); close it and begin it again", in.id, in.durable, err)
		in.advanced()
		return
	}
	in.end = in.durable
}

// Complete verifies the file and delivers it into destDir. The size must
// be Info.Size (else ErrIncomplete, and nothing changes) and the SHA-256
// of the bytes received Info.SHA256: else the error wraps ErrCorrupt, and
// the partial file and the state are removed, since a resume would only
// rebuild the same wrong file.
//
// Delivery is atomic: the file appears in destDir, created if needed,
// whole and under its final name in one step, and it never replaces a
// file already there: a name in use gets " (1)", " (2)"... before its
// extension (see placeUnique). On the spool's filesystem that is a hard
// link; on another one the file is first copied to a hidden temp name in
// destDir and fsynced. The directory is fsynced before the state is
// removed, so a crash at any point either leaves the transfer to complete
// again or has delivered it, once: a Complete that runs again after a
// crash finds the file it delivered instead of delivering it twice.
//
// It returns the path of the delivered file; the Incoming is then closed.
// If the delivery itself fails (the folder is full, say: ErrSpoolFull),
// the transfer stays whole and open in the spool, and Complete can be
// called again.
func (in *Incoming) Complete(destDir string) (string, error) {
	final, err := in.Deliver(destDir)
	if err != nil {
		return "", err
	}
	in.Finish()
	return final, nil
}

// Deliver is Complete without the cleanup: the file is verified and
// placed in destDir, but the transfer stays in the spool, whole, until
// Finish. A receiver that must record the delivery elsewhere (put the file
// message in a queue) does that between the two: if it crashes before
// Finish, the transfer resumes at its end and Deliver finds the file it
// placed instead of placing it twice.
func (in *Incoming) Deliver(destDir string) (string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.usable(); err != nil {
		return "", err
	}
	if in.end < in.info.Size {
		return "", fmt.Errorf("transfer %s: %d of %d bytes received; resume at %d: %w",
			in.id, in.end, in.info.Size, in.durable, ErrIncomplete)
	}
	if in.info.Pending() {
		return "", fmt.Errorf("transfer %s: all %d bytes received, but not the checksum that follows them: %w",
			in.id, in.info.Size, ErrIncomplete)
	}
	in.bg.wait()
	if sum := hex.EncodeToString(in.h.Sum(nil)); sum != in.info.SHA256 {
		in.log.Warn("transfer corrupt; partial file removed", slog.String(logkey.File, in.info.Filename))
		rerr := in.finish()
		return "", fmt.Errorf("transfer %s of %q: received SHA-256 %s, announced %s; the partial file was removed, send it again: %w%s",
			in.id, in.info.Filename, sum, in.info.SHA256, ErrCorrupt, suffixErr(rerr))
	}
	// The state must say "all bytes are here" before the file gets a second
	// name: a resume after a crash must never cut the delivered file.
	if err := in.sync(true); err != nil {
		return "", err
	}
	final, err := deliver(in.partPath, destDir, in.info.Filename, in.id)
	if err != nil {
		return "", ioError(fmt.Sprintf("transfer %s: deliver %q into %s", in.id, in.info.Filename, destDir), err)
	}
	in.delivered = final
	return final, nil
}

// SetChecksum gives a transfer announced without its checksum (see
// Info.Pending) the SHA-256 its sender sent after the last byte, as 64
// lowercase hex digits (ErrBadInfo otherwise). Deliver then verifies the
// file against it, and the state records it with the final offset. It is
// kept in memory only until then: a restart before Deliver resumes below
// the size, and the sender sends the checksum again after the rest.
//
// A transfer that knows its checksum already (announced with it, or
// resumed from a state that had it) keeps it: a different one means the
// two cannot describe the same bytes, and the transfer is removed from the
// spool with an error wrapping ErrCorrupt, as Deliver does for a file that
// fails its checksum.
func (in *Incoming) SetChecksum(sum string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.usable(); err != nil {
		return err
	}
	if !sha256Pattern.MatchString(sum) {
		return fmt.Errorf("transfer %s: checksum %q is not 64 lowercase hex digits: %w", in.id, sum, ErrBadInfo)
	}
	switch in.info.SHA256 {
	case sum:
		return nil
	case "":
		in.info.SHA256 = sum
		return nil
	}
	in.log.Warn("transfer corrupt: its checksum changed; partial file removed", slog.String(logkey.File, in.info.Filename))
	rerr := in.finish()
	return fmt.Errorf("transfer %s of %q: the checksum sent after the content is %s, but %s was announced; the partial file was removed, send it again: %w%s",
		in.id, in.info.Filename, sum, in.info.SHA256, ErrCorrupt, suffixErr(rerr))
}

// Finish removes a delivered transfer from the spool and closes the
// Incoming. A failure to remove is logged, not returned: the file was
// delivered all the same, and the leftovers go at the next OpenSpool.
func (in *Incoming) Finish() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	if err := in.finish(); err != nil {
		in.log.Warn("file delivered, spool cleanup failed", slog.String(logkey.Path, in.delivered), slog.Any(logkey.Error, err))
	}
	in.log.Info("file delivered", slog.String(logkey.Path, in.delivered), slog.Int64(logkey.Size, in.info.Size))
}

// Abort drops the transfer: the partial file and the state are removed,
// and the spool space freed. reason is logged.
func (in *Incoming) Abort(reason string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return fmt.Errorf("transfer %s: %w", in.id, ErrClosed)
	}
	in.log.Info("transfer aborted", slog.String(logkey.File, in.info.Filename),
		slog.Int64(logkey.Offset, in.end), slog.String(logkey.Reason, reason))
	in.aborted = reason
	if err := in.finish(); err != nil {
		return fmt.Errorf("abort transfer %s: %w", in.id, err)
	}
	return nil
}

// Close closes the partial file and gives the id back to the spool,
// leaving the transfer to resume later at Offset. It does not Sync: bytes
// past Offset are dropped at the next Begin. Close after Complete or Abort
// does nothing.
func (in *Incoming) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	in.advanced()
	in.bg.stop()
	in.release()
	return in.f.Close()
}

// finish closes the Incoming and removes its files from the spool.
func (in *Incoming) finish() error {
	in.closed = true
	in.advanced()
	in.bg.stop()
	in.f.Close()
	err := removeTransfer(in.dir, in.statePath, in.partPath)
	in.release()
	return err
}

func (in *Incoming) usable() error {
	if in.closed {
		return fmt.Errorf("transfer %s: %w", in.id, ErrClosed)
	}
	return in.broken
}

func suffixErr(err error) string {
	if err == nil {
		return ""
	}
	return " (cleanup: " + err.Error() + ")"
}

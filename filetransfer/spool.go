package filetransfer

import (
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/petrelmq/petrel/internal/durable"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// Spool file suffixes. A transfer with id X is X.part (the bytes received
// so far) and X.state (what makes them resumable); X.state.tmp exists only
// while the state is being replaced.
const (
	partSuffix  = ".part"
	stateSuffix = ".state"
)

// stateVersion is written in every state file, so a future layout can tell
// an old one and convert or refuse it.
const stateVersion = 1

// state is the content of X.state, in JSON:
//
//	{
//	  "version": 1,
//	  "info":   {"filename": "report.csv", "size": 5242880,
//	             "sha256": "9f86…", "mod_time": "0001-01-01T00:00:00Z"},
//	  "offset": 3145728,
//	  "hash":   "<base64 of the SHA-256 state after offset bytes>"
//	}
//
// offset is durable: the first offset bytes of X.part were fsynced before
// this state was. sha256 is empty while the file's checksum follows (see
// Info.Pending); offset is then always below size, so that a resume never
// finds a whole file it could not verify. hash is crypto/sha256's MarshalBinary after those bytes,
// so a resume carries the checksum on without reading X.part again.
type state struct {
	Version int    `json:"version"`
	Info    Info   `json:"info"`
	Offset  int64  `json:"offset"`
	Hash    []byte `json:"hash"`
}

// SpoolOption configures OpenSpool.
type SpoolOption func(*Spool)

// WithLogger sets the logger of a Spool; the default is slog.Default().
// A Spool logs at the edges of a transfer's life (restarted from 0,
// aborted, delivered), never per chunk, and never an error it returns.
func WithLogger(l *slog.Logger) SpoolOption { return func(s *Spool) { s.log = l } }

// WithBufferedWrites writes the files received through the page cache
// only, never with O_DIRECT (see Incoming.writeAt): for a filesystem
// whose direct writes are slow, such as some network filesystems.
func WithBufferedWrites() SpoolOption { return func(s *Spool) { s.buffered = true } }

// Spool is a directory of incoming transfers. Each transfer is owned by at
// most one Incoming at a time in the process (ErrBusy otherwise); one
// process at a time may use a spool directory.
type Spool struct {
	dir      string
	log      *slog.Logger
	buffered bool // see WithBufferedWrites

	mu   sync.Mutex
	open map[string]bool // ids with a live Incoming

	quota quota // see SetQuota
}

// PendingTransfer is a transfer found in the spool: one a restart left
// half done, to be resumed at Offset with Begin.
type PendingTransfer struct {
	ID     string
	Info   Info
	Offset int64 // durable offset; where the sender must resume
	// Touched is when the transfer's state was last written: when it
	// last made progress.
	Touched time.Time
}

// OpenSpool opens the spool in dir, creating it if needed. It removes what
// a crash can leave and nothing needs: a state temp file, and a partial
// file without a state (a transfer whose end was under way).
func OpenSpool(dir string, opts ...SpoolOption) (*Spool, error) {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open spool %s: %w", dir, err)
	}
	s := &Spool{dir: dir, log: slog.Default(), open: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	s.log = s.log.With(slog.String(logkey.Component, "filetransfer"), slog.String(logkey.Spool, dir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open spool %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		orphan := strings.HasSuffix(name, stateSuffix+".tmp")
		if id, ok := strings.CutSuffix(name, partSuffix); ok && CheckID(id) == nil {
			_, err := os.Lstat(s.statePath(id))
			orphan = errors.Is(err, fs.ErrNotExist)
		}
		if orphan {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open spool %s: clean up %s: %w", dir, name, err)
			}
		}
	}
	return s, nil
}

// Dir returns the spool directory.
func (s *Spool) Dir() string { return s.dir }

func (s *Spool) partPath(id string) string  { return filepath.Join(s.dir, id+partSuffix) }
func (s *Spool) statePath(id string) string { return filepath.Join(s.dir, id+stateSuffix) }

// Begin opens the transfer id of the file info, to receive it. If the
// spool holds a transfer with that id for the same file (same Filename,
// Size and SHA256), it resumes it at its durable offset, without reading
// the partial file; Offset tells the sender where to go on. Anything else
// (no state, a state for another file, an unreadable state or a partial
// file shorter than its state says) starts the transfer again at 0.
//
// Bytes written after the last Sync before a crash or a Close are dropped:
// they were never acknowledged.
func (s *Spool) Begin(id string, info Info) (*Incoming, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if err := info.CheckAnnounced(); err != nil {
		return nil, err
	}
	info.ModTime = info.ModTime.UTC() // what a JSON round trip gives back
	if err := s.acquire(id); err != nil {
		return nil, err
	}
	in, why, err := s.resume(id, info)
	if err == nil && in == nil {
		if why != "" {
			s.log.Warn("transfer starts again from 0", slog.String(logkey.ID, id), slog.String(logkey.Reason, why))
		}
		in, err = s.fresh(id, info)
	}
	if err != nil {
		s.release(id)
		return nil, err
	}
	return in, nil
}

// resume opens the existing transfer id if it can go on. It returns a nil
// Incoming, with the reason when there was something to resume, when the
// transfer must start again.
func (s *Spool) resume(id string, info Info) (*Incoming, string, error) {
	st, err := readState(s.statePath(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case err != nil:
		return nil, err.Error(), nil
	case !st.Info.sameFile(info):
		return nil, fmt.Sprintf("the spool held another file under this id (%q, %d bytes)", st.Info.Filename, st.Info.Size), nil
	case st.Offset < 0 || st.Offset > info.Size:
		return nil, fmt.Sprintf("the state's offset %d is out of the file", st.Offset), nil
	case st.Info.Pending() && st.Offset == info.Size:
		// Never written (see Incoming.sync): a whole file whose checksum
		// is unknown could only be resumed by an ack of its size, which
		// would pass custody of an unverified file.
		return nil, "the state holds the whole file but not its checksum", nil
	}
	if info.SHA256 == "" {
		// The checksum follows in this announcement, and an earlier one
		// (or this receiver's verification) gave it already: keep it, the
		// trailer must match it (see SetChecksum).
		info.SHA256 = st.Info.SHA256
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Hash); err != nil {
		return nil, fmt.Sprintf("the state's checksum is unreadable: %v", err), nil
	}
	f, err := os.OpenFile(s.partPath(id), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "the partial file is missing", nil
	} else if err != nil {
		return nil, "", fmt.Errorf("resume transfer %s: %w", id, err)
	}
	if why, err := truncateTo(f, st.Offset); why != "" || err != nil {
		f.Close()
		if err != nil {
			err = ioError("resume transfer "+id, err)
		}
		return nil, why, err
	}
	return s.newIncoming(id, info, f, h, st.Hash, st.Offset), "", nil
}

// truncateTo cuts the partial file back to the durable offset: bytes past
// it were written but never synced, so they may be garbage after a crash.
// It returns why the file cannot be resumed, if it cannot.
func truncateTo(f *os.File, offset int64) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if fi.Size() < offset {
		return fmt.Sprintf("the partial file has %d bytes, fewer than the durable %d", fi.Size(), offset), nil
	}
	if fi.Size() > offset {
		return "", f.Truncate(offset)
	}
	return "", nil
}

// fresh starts the transfer id at offset 0. The state is written before
// the partial file is created, so a partial file without a state is always
// garbage (OpenSpool removes it). An old partial file is unlinked, never
// truncated: after a crash during Complete it may also be the delivered
// file, under another name.
func (s *Spool) fresh(id string, info Info) (*Incoming, error) {
	if err := os.Remove(s.partPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("begin transfer %s: %w", id, err)
	}
	h := sha256.New()
	hs, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("begin transfer %s: %w", id, err)
	}
	if err := writeState(s.statePath(id), info, 0, hs); err != nil {
		return nil, ioError("begin transfer "+id, err)
	}
	f, err := os.OpenFile(s.partPath(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		os.Remove(s.statePath(id))
		return nil, ioError("begin transfer "+id, err)
	}
	// The partial file's name must be durable before any checkpoint says
	// its bytes are: a power loss would otherwise keep the state and take
	// the file, and the transfer would start again from 0.
	if err := durable.SyncDir(s.dir); err != nil {
		f.Close()
		return nil, ioError("begin transfer "+id, err)
	}
	return s.newIncoming(id, info, f, h, hs, 0), nil
}

func (s *Spool) newIncoming(id string, info Info, f *os.File, h hash.Hash, hs []byte, offset int64) *Incoming {
	return &Incoming{
		id: id, info: info, dir: s.dir, log: s.log.With(slog.String(logkey.ID, id)),
		partPath: s.partPath(id), statePath: s.statePath(id),
		f: f, h: h, end: offset, durable: offset, durableHash: hs, kicked: offset, bg: startHash(h),
		direct:  !s.buffered && setDirect(f, true),
		release: func() { s.release(id) },
	}
}

// Pending lists the transfers in the spool, in id order, with the offset
// Begin would resume them at. Call it at startup to learn which transfers
// to ask the senders to resume, and which to Discard. A transfer whose
// state is unreadable is listed at offset 0 with a zero Info: Begin starts
// it again, Discard removes it.
func (s *Spool) Pending() ([]PendingTransfer, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list spool %s: %w", s.dir, err)
	}
	var out []PendingTransfer
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), stateSuffix)
		if !ok || CheckID(id) != nil {
			continue
		}
		p := PendingTransfer{ID: id}
		if fi, err := e.Info(); err == nil {
			p.Touched = fi.ModTime()
		}
		if st, err := readState(s.statePath(id)); err == nil {
			p.Info = st.Info
			if fi, err := os.Stat(s.partPath(id)); err == nil && fi.Size() >= st.Offset {
				p.Offset = st.Offset
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Discard removes the transfer id from the spool without opening it: for
// a transfer whose file message expired or was refused while it sat here.
// It is not an error if there is nothing to remove.
func (s *Spool) Discard(id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	if err := s.acquire(id); err != nil {
		return err
	}
	defer s.release(id)
	return removeTransfer(s.dir, s.statePath(id), s.partPath(id))
}

// removeTransfer removes a transfer's state, then its partial file, then
// makes that durable. State first: a crash in between leaves a partial
// file without a state, which OpenSpool removes.
func removeTransfer(dir, statePath, partPath string) error {
	for _, p := range []string{statePath, partPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return durable.SyncDir(dir)
}

func (s *Spool) acquire(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id] {
		return fmt.Errorf("transfer %s: %w", id, ErrBusy)
	}
	s.open[id] = true
	return nil
}

func (s *Spool) release(id string) {
	s.mu.Lock()
	delete(s.open, id)
	s.mu.Unlock()
	s.settle(id)
}

// readState reads a state file. Any content that is not a complete state
// of this version is an error: the caller starts the transfer again.
func readState(path string) (state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return state{}, err
	}
	return decodeState(data)
}

// decodeState decodes the content of a state file (see state). The file
// is the node's own, but a disk, a crash or a hand can leave anything in
// it: whatever does not decode to a complete state of this version, with
// a usable Info, an offset within the file and a SHA-256 state that
// unmarshals, is an error, never a panic.
func decodeState(data []byte) (state, error) {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return state{}, fmt.Errorf("the state file is unreadable: %w", err)
	}
	if st.Version != stateVersion {
		return state{}, fmt.Errorf("the state file has version %d, not %d", st.Version, stateVersion)
	}
	if err := st.Info.CheckAnnounced(); err != nil {
		return state{}, fmt.Errorf("the state file describes no usable file: %w", err)
	}
	if st.Offset < 0 || st.Offset > st.Info.Size {
		return state{}, fmt.Errorf("the state's offset %d is out of the %d-byte file", st.Offset, st.Info.Size)
	}
	if err := sha256.New().(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Hash); err != nil {
		return state{}, fmt.Errorf("the state's checksum is unreadable: %w", err)
	}
	return st, nil
}

// writeState replaces the state file at path atomically and durably, at
// every checkpoint too. A checkpoint whose rename were left to the kernel
// would be lost with the power (only a directory fsync makes a rename
// durable), and each one would: the transfer would start again from 0,
// not from its last checkpoint. The directory fsync costs little next to
// the file's own, made once per sync_bytes.
func writeState(path string, info Info, offset int64, hash []byte) error {
	data, err := json.Marshal(state{Version: stateVersion, Info: info, Offset: offset, Hash: hash})
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data)
}

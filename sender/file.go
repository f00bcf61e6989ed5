package sender

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// FileConfig tunes file transfers. Zero fields take their defaults.
type FileConfig struct {
	// ChunkSize is the content bytes per chunk packet (default 512 KiB).
	// It must fit the session's MaxFrame. Each chunk costs a read, a frame,
	// a write and a few goroutine wakeups on both sides, whatever its size:
	// on a loaded machine fewer, larger chunks go faster. It stays well
	// under the connection's 1 MiB write queue, so that an urgent message
	// on the same connection never waits behind much file data.
	ChunkSize int
	// Window is the most chunks in flight per transfer (default 16: 8 MiB
	// at the default chunk size). Fewer leave a loaded machine's scheduling
	// delays uncovered: the link idles while an ack waits for a CPU. What
	// an urgent message on the same connection may queue behind is bounded
	// by the connection's write queue, not by this.
	Window int
	// Concurrency is how many files of one send queue move at once
	// (default 4). File messages past it wait, leased, for a turn; the
	// queue's other messages do not wait for them.
	Concurrency int
	// Done is called when a file message leaves its send queue: with nil
	// once the next hop took custody of the file, or with why it failed for
	// good. It runs before the message is acked, so that after a crash in
	// between it runs again rather than never.
	Done func(m *message.Message, err error)
	// Source returns the path to read m's content from, or why m must not
	// be sent: a file message whose path is not one the node gave it fails
	// for good with that reason, before anything is announced or read.
	// Nil means m.File.SendFilePath as it stands.
	Source func(m *message.Message) (string, error)
	// Checksums gives the SHA-256 of the files whose messages were stored
	// before it was known (FileChecksum empty: the checksum follows), as
	// the origin's Send computes it. Nil, or no entry for a message (the
	// node restarted since its Send), means the sender hashes the file
	// itself.
	Checksums *Checksums
}

// DefaultChunkSize is FileConfig.ChunkSize's default.
const DefaultChunkSize = 512 << 10

func (c FileConfig) withDefaults() FileConfig {
	if c.ChunkSize <= 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.Window <= 0 {
		c.Window = 16
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Done == nil {
		c.Done = func(*message.Message, error) {}
	}
	if c.Source == nil {
		c.Source = func(m *message.Message) (string, error) { return m.File.SendFilePath, nil }
	}
	return c
}

// PropSourceModTime is the application property, Unix nanoseconds, in
// which the origin keeps its file's modification time when the file was
// described: the sender checks the file against it while it sends. It is
// not sent to the next hop, nor is SendFilePath, nor the peer that handed
// the file to this node (filetransfer.PropHandedBy).
const PropSourceModTime = filetransfer.PropSourceModTime

// maxCorruptRetries is how many times a file that failed the next hop's
// checksum is sent again from the start before it is given up.
const maxCorruptRetries = 3

// errPermanent marks a failure that sending again cannot mend.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// errFollowRefused is the refusal, for good, of a file announced without
// its checksum: perhaps only because the next hop does not take a
// checksum that follows, which announcing the file with it would mend.
type errFollowRefused struct{ perm errPermanent }

func (e errFollowRefused) Error() string { return e.perm.Error() }
func (e errFollowRefused) Unwrap() error { return e.perm }

// FileStatus is one file a sender is moving.
type FileStatus struct {
	ID       uint64 `json:"id"` // the file message's id
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Acked    int64  `json:"acked"` // bytes the next hop holds durably
	// State is one of filetransfer's sending states: StateSending or
	// StateBackingOff.
	State filetransfer.State `json:"state"`
	Error string             `json:"error,omitempty"`
	Since time.Time          `json:"since"`
}

// files runs a sender's file transfers: Concurrency workers take leased
// file messages from todo. They start with the first file, so that a send
// queue that never carries one costs no goroutines for them, and live as
// long as the Sender.
type files struct {
	cfg   FileConfig
	todo  chan *queue.Delivery
	wg    sync.WaitGroup
	ctx   context.Context // the Sender's
	start sync.Once

	mu       sync.Mutex
	active   map[*fileRun]struct{}
	forwards map[earlyKey]chan struct{} // forwards begun before the file was whole; closed when each ends
	stopped  bool                       // stopFiles began: no forward starts any more
	bytes    atomic.Int64               // content bytes acked by next hops
	wire     atomic.Int64               // content bytes sent, resends included
	done     atomic.Int64               // files handed over
	failed   atomic.Int64               // files given up
	early    atomic.Int64               // forwards begun while the file was still received (see Forward)
}

type fileRun struct {
	mu sync.Mutex
	st FileStatus
	// counted is the highest offset whose bytes were added to
	// files.bytes: a session resumed at an earlier checkpoint sends bytes
	// again that the next hop had acked, and they are counted once.
	counted int64
}

// acked records an ack of offset a and returns how many bytes it adds to
// what this run counted as acked.
func (r *fileRun) acked(a int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a <= r.counted {
		return 0
	}
	n := a - r.counted
	r.counted = a
	return n
}

func (r *fileRun) set(f func(*FileStatus)) {
	r.mu.Lock()
	f(&r.st)
	r.mu.Unlock()
}

func (s *Sender) startFiles(ctx context.Context) {
	f := &s.files
	f.cfg = s.cfg.Files.withDefaults()
	f.todo = make(chan *queue.Delivery, 4*f.cfg.Concurrency)
	f.active = map[*fileRun]struct{}{}
	f.ctx = ctx
}

// startFileWorkers starts the workers, once. Only the send loop calls it,
// and Stop waits for that loop before stopFiles waits for the workers.
func (s *Sender) startFileWorkers() {
	f := &s.files
	f.start.Do(func() {
		for range f.cfg.Concurrency {
			f.wg.Go(func() { s.fileWorker(f.ctx) })
		}
	})
}

// stopFiles waits for the workers (ctx is cancelled) and gives back the
// file messages that waited for a turn.
func (s *Sender) stopFiles() {
	s.files.mu.Lock()
	s.files.stopped = true
	s.files.mu.Unlock()
	s.files.wg.Wait()
	for {
		select {
		case d := <-s.files.todo:
			d.Release()
		default:
			return
		}
	}
}

// handOff gives a leased file message to the workers, holding its lease
// for as long as the transfer takes. It blocks while every worker is busy
// and the waiting line is full.
func (s *Sender) handOff(ctx context.Context, d *queue.Delivery) error {
	if err := d.Hold(); err != nil {
		return nil // settled meanwhile: nothing to send
	}
	s.startFileWorkers()
	select {
	case s.files.todo <- d:
		return nil
	case <-ctx.Done():
		d.Release()
		return context.Cause(ctx)
	}
}

func (s *Sender) fileWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-s.files.todo:
			s.transferFile(ctx, d)
		}
	}
}

// startRun shows m's transfer among the link's active ones until done.
func (s *Sender) startRun(m *message.Message) (*fileRun, func()) {
	run := &fileRun{st: FileStatus{ID: m.ID, Filename: m.File.Filename, Size: m.File.Filesize, State: filetransfer.StateSending, Since: time.Now()}}
	s.files.mu.Lock()
	s.files.active[run] = struct{}{}
	s.files.mu.Unlock()
	return run, func() {
		s.files.mu.Lock()
		delete(s.files.active, run)
		s.files.mu.Unlock()
	}
}

// transferFile moves one file message's content to the next hop, then
// settles it: acked once the next hop has the file, dead-lettered if it
// fails for good, released if the sender stops first.
func (s *Sender) transferFile(ctx context.Context, d *queue.Delivery) {
	m, err := d.Message()
	if err != nil {
		s.settleFile(d, nil, errPermanent{err})
		return
	}
	run, done := s.startRun(m)
	defer done()
	log := s.log.With(slog.String(logkey.File, m.File.Filename), slog.Uint64("msg_id", m.ID))
	path, err := s.files.cfg.Source(m)
	if err != nil {
		log.Warn("file message refused: its path is not one this node gave it", slog.Any(logkey.Error, err))
		s.settleFile(d, m, errPermanent{err})
		return
	}
	// A forward of this file begun while this node still received it
	// (cut-through) ends first: the next hop then has the file, or holds
	// what it got, and this session goes on from there.
	s.files.waitEarly(ctx, m)
	open := func() (chunkSource, error) { return openSource(m, path) }
	var known string // the checksum that follows, once had: every session sends the same
	sum := &followingSum{
		wait: func(ctx context.Context) (string, error) {
			if known == "" {
				var err error
				if known, err = s.checksumOf(ctx, m, path); err != nil {
					return "", err
				}
			}
			return known, nil
		},
		gaveUp: func() error {
			if err := s.files.cfg.Checksums.failed(m); err != nil {
				return errHashFailed(err)
			}
			return nil
		},
	}
	if m.File.FileChecksum == "" {
		// Send stored the message before it hashed the file, and the hash
		// failed: the file must not be delivered anywhere.
		if err := sum.gaveUp(); err != nil {
			s.settleFile(d, m, err)
			return
		}
	}
	attempt, corrupt, full := 0, 0, 0
	announced := m // what the next hop is told: m, or m with its checksum
	for {
		err := s.sendFile(ctx, announced, open, sum, run)
		if err == nil {
			s.settleFile(d, m, nil)
			return
		}
		if ctx.Err() != nil {
			d.Release()
			return
		}
		var fr errFollowRefused
		if errors.As(err, &fr) && announced == m {
			// A next hop that does not take a checksum that follows (one
			// older than this node) refuses the announcement: announce
			// the file again with its checksum, once it is known. A next
			// hop that refuses the file for another reason refuses it
			// again, and the file fails with that reason.
			log.Info("the next hop refused the file announced before its checksum; announcing it with the checksum", slog.Any(logkey.Error, err))
			cs, serr := sum.wait(ctx)
			if serr == nil {
				c := *m
				c.File.FileChecksum = cs
				announced = &c
				continue
			}
			if ctx.Err() != nil {
				d.Release()
				return
			}
			err = serr
		}
		if errors.Is(err, filetransfer.ErrCorrupt) && corrupt < maxCorruptRetries {
			corrupt++
			log.Warn("the next hop found the file corrupt; sending it again from the start", slog.Any(logkey.Error, err))
			continue
		}
		var perm errPermanent
		if errors.As(err, &perm) || errors.Is(err, filetransfer.ErrCorrupt) {
			log.Warn("file transfer failed", slog.Any(logkey.Error, err))
			s.settleFile(d, m, err)
			return
		}
		attempt++
		wait, dialFailed := s.retryWait(attempt, err)
		state := filetransfer.StateBackingOff
		if errors.Is(err, session.ErrFull) {
			// The next hop's spool is full: each session would send again
			// what came after its checkpoint only to be ended at the same
			// write, so the waits grow, well past the reconnect backoff.
			full++
			wait, state = fullWait(full), filetransfer.StatePaused
		} else {
			full = 0
		}
		run.set(func(st *FileStatus) { st.State, st.Error = state, err.Error() })
		switch {
		case state == filetransfer.StatePaused:
			if full == 1 {
				log.Info("file transfer paused: the next hop's spool is full; trying again with growing waits", slog.Duration("wait", wait), slog.Any(logkey.Error, err))
			}
		// The pool logs failed dials, once for all; a lack of route is
		// logged once for all too.
		case !dialFailed && !s.logNoRoute(err, wait):
			log.Info("file transfer interrupted; resuming after a backoff", slog.Duration("wait", wait), slog.Any(logkey.Error, err))
		}
		if !s.pause(ctx, wait, err) {
			d.Release()
			return
		}
		run.set(func(st *FileStatus) { st.State = filetransfer.StateSending })
	}
}

// The waits of a transfer whose next hop's spool is full: firstFullWait
// after the first session it ended, doubling up to maxFullWait, so that a
// spool that stays full for hours costs a session a minute, while one
// freed soon is used again soon.
const (
	firstFullWait = time.Second
	maxFullWait   = time.Minute
)

// fullWait is the wait after the n-th session in a row that the next hop
// ended for its full spool, with jitter (a random wait in [d/2, d]).
func fullWait(n int) time.Duration {
	d := firstFullWait
	for i := 1; i < n && d < maxFullWait; i++ {
		d *= 2
	}
	d = min(d, maxFullWait)
	return d/2 + rand.N(d/2+1)
}

// settleFile reports the outcome to FileConfig.Done, then acks the file
// message, or dead-letters it with the reason.
func (s *Sender) settleFile(d *queue.Delivery, m *message.Message, err error) {
	if m != nil {
		s.files.cfg.Done(m, err)
	}
	if err == nil {
		s.files.done.Add(1)
		if aerr := d.Ack(); aerr != nil && !errors.Is(aerr, queue.ErrClosed) {
			s.log.Warn("ack of a forwarded file failed", slog.Any(logkey.Error, aerr))
		}
	} else {
		s.files.failed.Add(1)
		s.st.refused.Add(1)
		if derr := d.DeadLetter("file transfer failed: " + err.Error()); derr != nil {
			s.log.Warn("dead-letter of a failed file failed", slog.Any(logkey.Error, derr))
		}
	}
	// After the settle committed: a record that Send's hash failed goes
	// only once the message is gone.
	if m != nil {
		s.files.cfg.Checksums.forget(m)
	}
}

// checksumOf returns the SHA-256 of m's file, whose message was stored
// before it was known: the one Send computed, waiting for it, or, when no
// Send registered it (the node restarted since), the file's own, read
// here, as long as the file is still the one described (size and
// modification time). A failure is permanent: the file is given up.
func (s *Sender) checksumOf(ctx context.Context, m *message.Message, path string) (string, error) {
	sum, ok, err := s.files.cfg.Checksums.wait(ctx, m)
	if ctx.Err() != nil {
		return "", context.Cause(ctx)
	}
	if ok {
		if err != nil {
			return "", errHashFailed(err)
		}
		return sum, nil
	}
	want := filetransfer.InfoFromProps(m.File)
	want.ModTime = modTimeOf(m, path)
	info, err := filetransfer.DescribeMatching(ctx, path, want)
	if ctx.Err() != nil {
		return "", context.Cause(ctx)
	}
	if err != nil {
		return "", errPermanent{err}
	}
	return info.SHA256, nil
}

// announcement is what the next hop is told about m: m without what only
// matters on this node.
func announcement(m *message.Message) ([]byte, error) {
	a := *m
	a.File.SendFilePath = ""
	a.Properties = append(message.Properties(nil), m.Properties...)
	a.Properties.Delete(PropSourceModTime)
	a.Properties.Delete(filetransfer.PropHandedBy)
	return a.MarshalBinary()
}

// sendFile runs one file session: announce, learn where the next hop
// stands, send the rest (read from what open returns) and wait for the
// final ack. nil means the next hop took custody. A file announced
// without its checksum (it follows) gets it from sum after the last
// chunk, and sends it then (session.FileChecksumSeq).
func (s *Sender) sendFile(ctx context.Context, m *message.Message, open func() (chunkSource, error),
	sum *followingSum, run *fileRun) error {
	hop, err := s.resolveHop()
	if err != nil {
		return err
	}
	cfg := s.files.cfg
	follows := m.File.FileChecksum == ""
	window := cfg.Window
	if follows {
		window++ // the checksum travels in a packet of its own (see sendChunks)
	}
	conn, sess, err := s.pool.Open(ctx, hop, func(c *session.Conn) (*session.Session, error) {
		return c.OpenFile(ctx, s.q.Name(), uint32(window))
	})
	if err != nil {
		return fmt.Errorf("open file session to %s: %w", hop, err)
	}
	defer sess.CloseWithin("transfer over", closeWait)
	am := m
	if follows && sess.Window() < 2 {
		// No room for both the last chunk and the checksum: wait for the
		// checksum and announce the file with it.
		cs, err := sum.wait(ctx)
		if err != nil {
			return err
		}
		c := *m
		c.File.FileChecksum = cs
		am, follows = &c, false
	}
	ann, err := announcement(am)
	if err != nil {
		return errPermanent{err}
	}
	if err := sess.SendData(ctx, 0, ann); err != nil {
		return fmt.Errorf("announce to %s: %w", hop, err)
	}
	size := m.File.Filesize
	at, err := nextAck(ctx, sess, size, conn)
	if refused := (errPermanent{}); follows && errors.As(err, &refused) {
		return errFollowRefused{refused}
	}
	if err != nil {
		return err
	}
	run.set(func(st *FileStatus) { st.Acked, st.Error = at, "" })
	// The next hop's offset acks what it holds, acks lost in a cut included.
	s.files.bytes.Add(run.acked(at))
	if at == size {
		return nil // the next hop had it already
	}
	src, err := open()
	if err == nil {
		if !follows {
			sum = nil
		}
		err = s.sendChunks(ctx, conn, sess, src, at, sum, run)
		src.Close()
	} else {
		err = errPermanent{err}
	}
	var perm errPermanent
	if errors.As(err, &perm) {
		// The next hop holds part of the file: tell it to free that.
		reason := perm.Error()
		if len(reason) > 4096 {
			reason = reason[:4096]
		}
		if aerr := sess.SendData(ctx, session.FileAbortSeq, []byte(reason)); aerr != nil {
			s.log.Debug("could not tell the next hop the file was given up", slog.Any(logkey.Error, aerr))
		}
	}
	return err
}

// chunkSource is what a file session reads the content from: the file
// at its path (filetransfer.Source), or, for a file this node still
// receives, its spooled part as it becomes durable (filetransfer.Follower).
type chunkSource interface {
	ReadChunk(offset int64, buf []byte) (int, error)
	Verify() error
	Info() filetransfer.Info
	Close() error
}

// openSource opens m's file at path, checked against what was announced.
func openSource(m *message.Message, path string) (chunkSource, error) {
	if path == "" {
		return nil, errors.New("the file message names no file to send (sendFilePath is empty)")
	}
	info := filetransfer.InfoFromProps(m.File)
	info.ModTime = modTimeOf(m, path)
	src, err := filetransfer.OpenSource(path, info)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return src, nil
}

// modTimeOf returns the modification time recorded for m's file when it
// was described, or, with no record, the file's own: size and checksum
// still hold it then.
func modTimeOf(m *message.Message, path string) time.Time {
	if v, ok := m.Properties.Get(PropSourceModTime); ok {
		return time.Unix(0, v.Int64())
	}
	if fi, err := os.Stat(path); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// sendChunks sends the content from offset at, keeping at most Window
// chunks unacked, until the next hop acks the whole size. With sum (the
// file was announced without its checksum), it sends the checksum after
// the last chunk, keeping one packet of the window for it: the receiver
// acks nothing past the last chunk before the checksum, so the checksum
// must fit beside the chunks in flight.
func (s *Sender) sendChunks(ctx context.Context, conn *session.Conn, sess *session.Session, src chunkSource, at int64,
	sum *followingSum, run *fileRun) error {
	cfg := s.files.cfg
	size := src.Info().Size
	buf := make([]byte, cfg.ChunkSize)
	var ends []int64 // end offsets of chunks in flight
	next, acked := at, at
	window := max(int(sess.Window()), 1)
	if sum != nil {
		window = max(window-1, 1) // sendFile made sure the window has 2 or more
	}
	for {
		if sum != nil && sum.gaveUp != nil {
			// Send's hash failed (the file changed, or Send's context
			// ended): stop now, not after the last chunk, so that a
			// large file given up does not cross the link for nothing.
			if err := sum.gaveUp(); err != nil {
				return err
			}
		}
		batch := next
		for next < size && len(ends) < window {
			n, err := src.ReadChunk(next, buf)
			if errors.Is(err, filetransfer.ErrUnfinished) || errors.Is(err, filetransfer.ErrClosed) {
				// A followed transfer stopped short (see Forward): the
				// file is not at fault, and the next hop keeps its part.
				return err
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return errPermanent{err}
			}
			next += int64(n)
			s.files.wire.Add(int64(n))
			if err := sess.SendData(ctx, uint64(next), buf[:n]); err != nil {
				return fmt.Errorf("send chunk ending at %d: %w", next, err)
			}
			ends = append(ends, next)
		}
		// Once per batch, not per chunk: what a change slips into the
		// batch is caught here, and the receiver's SHA-256 catches any
		// change Verify cannot see.
		if next > batch {
			if err := src.Verify(); err != nil {
				return errPermanent{err}
			}
		}
		if sum != nil && next == size {
			if err := sendChecksum(ctx, sess, sum.wait); err != nil {
				return err
			}
			sum = nil
		}
		a, err := nextAck(ctx, sess, size, conn)
		if err != nil {
			return err
		}
		if a > next || a < acked {
			return fmt.Errorf("%w: the next hop acked byte %d; sent up to %d, acked before %d", session.ErrProtocol, a, next, acked)
		}
		s.files.bytes.Add(run.acked(a))
		acked = a
		i := sort.Search(len(ends), func(i int) bool { return ends[i] > a })
		ends = ends[:copy(ends, ends[i:])]
		run.set(func(st *FileStatus) { st.Acked, st.Error = a, "" })
		if a == size {
			return nil
		}
	}
}

// errHashFailed gives the file up because the origin's Send could not
// hash it.
func errHashFailed(err error) error {
	return errPermanent{fmt.Errorf("the file's checksum could not be computed: %w", err)}
}

// followingSum is the checksum that follows a file announced without it.
// wait returns it once known. gaveUp, when set, tells without waiting
// whether it never will be (the origin's hash failed): the transfer then
// stops at its next ack rather than after its last chunk.
type followingSum struct {
	wait   func(context.Context) (string, error)
	gaveUp func() error
}

// sendChecksum sends the checksum that follows the file, once sum has it
// (the origin may still be hashing the file). The acks that arrive
// meanwhile wait in the session: the chunks in flight are fewer than the
// window, and so are they. A session that ends meanwhile (a cut link)
// ends the wait, so that the transfer resumes on a new one at once rather
// than after the hash.
func sendChecksum(ctx context.Context, sess *session.Session, sum func(context.Context) (string, error)) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-sess.Done():
			cancel(errSessionEnded)
		case <-stop:
		}
	}()
	cs, err := sum(wctx)
	if err != nil {
		if ctx.Err() == nil && context.Cause(wctx) == errSessionEnded {
			return fmt.Errorf("waiting for the file's checksum: %w", errSessionEnded)
		}
		if errors.Is(err, filetransfer.ErrAborted) {
			return errPermanent{err} // the next hop drops its part too
		}
		return err
	}
	if err := sess.SendData(ctx, session.FileChecksumSeq, session.AppendFileChecksum(nil, cs)); err != nil {
		return fmt.Errorf("send the file's checksum: %w", err)
	}
	return nil
}

// nextAck waits for the next hop's next answer on a file session: an
// offset, or a refusal (seq 0: the file is refused for good; seq size: its
// content failed the checksum there; an empty file cannot fail it, since
// its checksum is checked at the announcement).
func nextAck(ctx context.Context, sess *session.Session, size int64, conn *session.Conn) (int64, error) {
	select {
	case a, ok := <-sess.Acks():
		if !ok {
			select {
			case <-conn.Done():
				if err := conn.Err(); err != nil {
					return 0, fmt.Errorf("connection to %s lost: %w", conn.Peer().Name, err)
				}
			default:
			}
			if err := sess.Err(); err != nil {
				return 0, fmt.Errorf("file session ended: %w", err)
			}
			return 0, errSessionEnded
		}
		switch {
		case a.Refused && a.Seq == uint64(size) && size > 0:
			return 0, fmt.Errorf("%s: %w", a.Reason, filetransfer.ErrCorrupt)
		case a.Refused:
			return 0, errPermanent{fmt.Errorf("refused by the next hop: %s", a.Reason)}
		case a.Seq > uint64(size):
			return 0, fmt.Errorf("%w: the next hop acked byte %d of a %d-byte file", session.ErrProtocol, a.Seq, size)
		}
		return int64(a.Seq), nil
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// FileStats is what a sender's file side did.
type FileStats struct {
	Active []FileStatus `json:"active,omitempty"`
	Bytes  int64        `json:"bytes"`  // content bytes the next hops acked
	Wire   int64        `json:"wire"`   // content bytes sent, resends included
	Done   int64        `json:"done"`   // files handed over
	Failed int64        `json:"failed"` // files given up
	// Early counts the forwards begun while this node still received the
	// file (cut-through, see Sender.Forward).
	Early int64 `json:"early,omitempty"`
}

func (s *Sender) fileStats() FileStats {
	f := &s.files
	f.mu.Lock()
	out := FileStats{Bytes: f.bytes.Load(), Wire: f.wire.Load(), Done: f.done.Load(), Failed: f.failed.Load(), Early: f.early.Load()}
	for r := range f.active {
		r.mu.Lock()
		out.Active = append(out.Active, r.st)
		r.mu.Unlock()
	}
	f.mu.Unlock()
	sort.Slice(out.Active, func(i, j int) bool { return out.Active[i].Since.Before(out.Active[j].Since) })
	return out
}

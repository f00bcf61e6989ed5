package filetransfer

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/petrelmq/petrel/internal/durable"
	"github.com/petrelmq/petrel/internal/logkey"
)

// DefaultQuiet is how long a file must go without a write before the
// outbox looks at it: long enough to span the pauses of a program that
// writes a file in pieces, short enough that a dropped file leaves soon.
const DefaultQuiet = 2 * time.Second

// What Done does with a file that was sent.
const (
	AfterSent   = "sent"   // move it into sent/ (the default)
	AfterDelete = "delete" // delete it
)

// Names of the outbox's subdirectories, which it creates and never offers.
const (
	SentDir   = "sent"
	FailedDir = "failed"
)

// OutboxConfig configures WatchOutbox.
type OutboxConfig struct {
	// Dir is the folder to watch. It must exist. Subfolders are not
	// watched.
	Dir string
	// Quiet is how long a file must have had no write event before it is
	// checked for completeness. Zero or less means DefaultQuiet.
	Quiet time.Duration
	// Logger receives the outbox's logs, with component=filetransfer and
	// outbox=Dir. Nil means slog.Default().
	Logger *slog.Logger
}

// Outbox watches a folder and offers each file in it once it is complete.
// A file is complete by either of two conventions:
//
//  1. Rename: a file whose name ends in ".part" is never offered. Renamed
//     in the folder to another name (usually the same without ".part"),
//     it is offered at once. This is the fast and safe way for a program
//     to drop a file in: write "report.csv.part", close it, rename it.
//  2. Quiet: any other file is offered once it has had no write event for
//     Quiet, and its size and modification time are the same at a second
//     look Quiet later. So a writer that pauses for less than Quiet, or
//     writes without events (some network filesystems), is not taken
//     mid-file. A file is offered about 2×Quiet after its last write.
//
// A file moved in from another folder counts as convention 2, as does a
// rename whose two events another event came between. Files already in
// the folder at start are offered too, after the second look. Names that
// start with a dot (editors' and rsync's temporary files) are ignored, as
// are directories, symbolic links and the sent/ and failed/ folders. Other
// files that are not regular (a named pipe, a socket, a device) are
// offered like files: ready's sender refuses them, so they end in failed/
// with the reason.
//
// A file is offered once, and not again until Done, or someone else, has
// moved it away (or the Outbox is started again, which offers what is
// left: at least once). One that Done could not move away is offered
// again after a wait that doubles at each failure (see stuckRetry), so that
// its move is tried again once the cause is mended. Paths given to ready
// are absolute.
// Writing to a file while its transfer runs makes the transfer fail
// (Source.Verify), and Done moves it to failed/ with that reason.
//
// WatchOutbox starts one goroutine, watchLoop; Close stops it and waits.
// ready is called from watchLoop, one file at a time: it must return soon
// (start the transfer, do not run it) and may call Done. Done is safe from
// any goroutine.
type Outbox struct {
	dir, sent, failed string
	quiet             time.Duration
	log               *slog.Logger
	ready             func(path string)
	fsw               *fsnotify.Watcher

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	offered map[string]bool // names offered and not yet Done
	// stuck are the names offered whose Done could not move the file
	// out of the folder (sent/ is not a folder, the disk is read-only):
	// watchLoop offers each again once due, so that the move is tried
	// again once the cause is mended, without a restart.
	stuck map[string]stuckFile

	failMu sync.Mutex // held while a file and its reason go into failed/

	// rescan asks watchLoop to list the folder again: Done found another
	// file than the one sent under a name, whose own events came while the
	// name was offered, and were dropped.
	rescanNow chan struct{}

	// Owned by watchLoop.
	pending     map[string]*candidate
	renamedPart bool // the last event was a rename of a .part file
	// gone is set while the folder is removed or renamed away: its watch
	// is lost, and watchLoop looks for it every rewatchEvery until a
	// folder is there again, watches that one and lists it.
	gone bool
	// watching is !gone, for readers outside watchLoop (Watching).
	watching atomic.Bool
}

// Watching reports whether the folder is watched: false while it is
// removed or renamed away, until a folder is there again under its path.
func (o *Outbox) Watching() bool { return o.watching.Load() }

// Stuck returns how many files were sent, or failed, and could not be
// moved out of the folder: each is offered again, for its move only,
// after a wait (see stuckRetry).
func (o *Outbox) Stuck() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.stuck)
}

// rewatchEvery is how often an outbox whose folder was removed looks for
// it to come back: quick enough that a folder made again (by a deploy, a
// cleanup job) is watched before files pile up in it, and one stat a
// second at most while it stays away.
func (o *Outbox) rewatchEvery() time.Duration { return min(o.quiet, time.Second) }

// candidate is a file waiting to be found complete by convention 2.
type candidate struct {
	due    time.Time // when to look at it next
	looked bool      // stamp is from a look after a quiet period
	stamp  stamp
}

type stamp struct {
	size  int64
	mtime time.Time
}

func (s stamp) equal(o stamp) bool { return s.size == o.size && s.mtime.Equal(o.mtime) }

// WatchOutbox starts watching cfg.Dir and calls ready with the path of
// each complete file. It creates sent/ and failed/ in Dir.
func WatchOutbox(cfg OutboxConfig, ready func(path string)) (*Outbox, error) {
	o, err := newOutbox(cfg, ready)
	if err != nil {
		return nil, err
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch outbox %s: %w", o.dir, err)
	}
	// Watch before listing, so a file dropped in between is not missed.
	if err := fsw.Add(o.dir); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch outbox %s: %w", o.dir, err)
	}
	o.fsw = fsw
	if err := o.rescan(time.Now()); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch outbox %s: %w", o.dir, err)
	}
	o.log.Info("watching outbox", slog.Duration("quiet", o.quiet), slog.Int("waiting", len(o.pending)))
	o.wg.Add(1)
	go o.watchLoop(fsw.Events, fsw.Errors)
	return o, nil
}

// newOutbox checks cfg, applies its defaults and creates the
// subdirectories; it watches nothing yet.
func newOutbox(cfg OutboxConfig, ready func(path string)) (*Outbox, error) {
	if ready == nil {
		return nil, errors.New("watch outbox: ready is nil")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("watch outbox %s: %w", cfg.Dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("watch outbox %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("watch outbox %s: not a directory", dir)
	}
	o := &Outbox{
		dir: dir, sent: filepath.Join(dir, SentDir), failed: filepath.Join(dir, FailedDir),
		quiet: cfg.Quiet, log: cfg.Logger, ready: ready,
		stop: make(chan struct{}), offered: map[string]bool{}, stuck: map[string]stuckFile{}, pending: map[string]*candidate{},
		rescanNow: make(chan struct{}, 1),
	}
	o.watching.Store(true)
	if o.quiet <= 0 {
		o.quiet = DefaultQuiet
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	o.log = o.log.With(slog.String(logkey.Component, "filetransfer"), slog.String(logkey.Outbox, dir))
	for _, sub := range []string{o.sent, o.failed} {
		if err := durable.MkdirAll(sub, 0o750); err != nil {
			return nil, fmt.Errorf("watch outbox %s: %w", dir, err)
		}
	}
	return o, nil
}

// Close stops watching and waits for watchLoop to return. It is
// idempotent; it must not be called from ready.
func (o *Outbox) Close() error {
	o.closeOnce.Do(func() {
		close(o.stop)
		o.wg.Wait()
		o.closeErr = o.fsw.Close()
		o.log.Debug("stopped watching outbox")
	})
	return o.closeErr
}

// watchLoop turns events into offers until Close. It takes the event
// channels rather than reading o.fsw, so that tests can feed it inside a
// testing/synctest bubble, where the quiet timer runs on a fake clock.
func (o *Outbox) watchLoop(events <-chan fsnotify.Event, errs <-chan error) {
	defer o.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// rewatch fires while the folder is gone (o.gone); nil otherwise.
	var rewatch <-chan time.Time
	rewatchTimer := time.NewTimer(time.Hour)
	rewatchTimer.Stop()
	defer rewatchTimer.Stop()
	for {
		o.schedule(timer)
		if o.gone && rewatch == nil {
			rewatchTimer.Reset(o.rewatchEvery())
			rewatch = rewatchTimer.C
		}
		select {
		case <-o.stop:
			return
		case <-rewatch:
			rewatch = nil
			o.watchAgain(time.Now())
		case ev, ok := <-events:
			if !ok {
				return
			}
			o.event(ev, time.Now())
		case err, ok := <-errs:
			if !ok {
				return
			}
			o.watchError(err)
		case now := <-timer.C:
			o.look(now)
		case <-o.rescanNow:
			if err := o.rescan(time.Now()); err != nil {
				o.log.Error("outbox rescan", slog.Any(logkey.Error, err))
			}
		}
	}
}

// schedule sets timer to the earliest due candidate, or stops it.
func (o *Outbox) schedule(timer *time.Timer) {
	var next time.Time
	for _, c := range o.pending {
		if next.IsZero() || c.due.Before(next) {
			next = c.due
		}
	}
	o.mu.Lock()
	for _, sf := range o.stuck {
		if !sf.due.IsZero() && (next.IsZero() || sf.due.Before(next)) {
			next = sf.due
		}
	}
	o.mu.Unlock()
	if next.IsZero() {
		timer.Stop()
		return
	}
	timer.Reset(max(time.Until(next), 0))
}

// event handles one fsnotify event on the folder.
func (o *Outbox) event(ev fsnotify.Event, now time.Time) {
	afterPartRename := o.renamedPart
	o.renamedPart = false
	if filepath.Clean(ev.Name) == o.dir {
		if ev.Has(fsnotify.Remove|fsnotify.Rename) && !o.gone {
			o.folderGone()
		}
		return
	}
	if o.gone {
		return // a late event of the folder that went away
	}
	name := filepath.Base(ev.Name)
	if filepath.Dir(filepath.Clean(ev.Name)) != o.dir || o.ignored(name) {
		o.renamedPart = strings.HasSuffix(name, partSuffix) && ev.Has(fsnotify.Rename)
		return
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		// Gone: whatever comes next under this name is a new file, even if
		// this one was offered and Done never came (it was taken away).
		delete(o.pending, name)
		o.mu.Lock()
		delete(o.offered, name)
		delete(o.stuck, name)
		o.mu.Unlock()
		return
	}
	if o.isOffered(name) {
		return
	}
	switch {
	case ev.Has(fsnotify.Create) && afterPartRename:
		delete(o.pending, name)
		if fi, err := os.Lstat(ev.Name); err == nil && offerable(fi.Mode()) {
			o.offer([]string{name})
		}
	default: // Create, Write, Chmod: the file is being worked on
		c := o.pending[name]
		if c == nil {
			c = &candidate{}
			o.pending[name] = c
		}
		c.due, c.looked = now.Add(o.quiet), false
	}
}

// folderGone handles the removal, or renaming away, of the folder: its
// watch is dropped (a renamed folder would still report events, under
// names of the old path), and watchLoop looks for the folder to come
// back (watchAgain). Files dropped into a folder made again under the
// same path are then sent, as the configuration says they should be.
func (o *Outbox) folderGone() {
	o.gone = true
	o.watching.Store(false)
	if o.fsw != nil {
		o.fsw.Remove(o.dir) // gone with a removed folder already: the error says so
	}
	clear(o.pending)
	o.log.Error("outbox folder removed or renamed; not watching it until it is there again",
		slog.Duration("retry_every", o.rewatchEvery()))
}

// watchAgain is called while the folder is gone: if a folder is there
// again, it watches it, makes its sent/ and failed/, and lists it, as at
// start. Otherwise watchLoop tries again later.
func (o *Outbox) watchAgain(now time.Time) {
	fi, err := os.Stat(o.dir)
	if err != nil || !fi.IsDir() {
		return
	}
	// Watch before listing, so a file dropped in between is not missed.
	if o.fsw != nil {
		if err := o.fsw.Add(o.dir); err != nil {
			o.log.Warn("outbox folder is back, but cannot be watched yet", slog.Any(logkey.Error, err))
			return
		}
	}
	o.gone = false
	o.watching.Store(true)
	for _, sub := range []string{o.sent, o.failed} {
		if err := o.makeSub(sub); err != nil {
			o.log.Warn("outbox subfolder cannot be made", slog.String(logkey.Path, sub), slog.Any(logkey.Error, err))
		}
	}
	if err := o.rescan(now); err != nil {
		o.log.Error("outbox rescan", slog.Any(logkey.Error, err))
	}
	o.log.Info("outbox folder is there again; watching it", slog.Int("waiting", len(o.pending)))
}

// look checks each candidate whose quiet period is over: a first look
// records its size and modification time, a second one offers it if they
// did not change.
func (o *Outbox) look(now time.Time) {
	o.retryStuck(now)
	var ready []string
	for name, c := range o.pending {
		if c.due.After(now) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(o.dir, name))
		if err != nil || !offerable(fi.Mode()) {
			delete(o.pending, name) // gone, or a folder or link, never offered
			continue
		}
		st := stamp{size: fi.Size(), mtime: fi.ModTime()}
		if c.looked && st.equal(c.stamp) {
			ready = append(ready, name)
			continue
		}
		c.stamp, c.looked, c.due = st, true, now.Add(o.quiet)
	}
	// Oldest first, so files leave in the order they were dropped.
	sort.Slice(ready, func(i, j int) bool {
		a, b := o.pending[ready[i]].stamp.mtime, o.pending[ready[j]].stamp.mtime
		return a.Before(b) || a.Equal(b) && ready[i] < ready[j]
	})
	for _, name := range ready {
		delete(o.pending, name)
	}
	o.offer(ready)
}

// offer marks names offered and calls ready for each.
func (o *Outbox) offer(names []string) {
	if len(names) == 0 {
		return
	}
	o.mu.Lock()
	for _, n := range names {
		o.offered[n] = true
	}
	o.mu.Unlock()
	for _, n := range names {
		o.log.Debug("file ready", slog.String(logkey.File, n))
		o.ready(filepath.Join(o.dir, n))
	}
}

// rescan lists the folder and makes a candidate of every file that is
// neither offered nor already waiting, as if it had just gone quiet: it
// is offered after one more look. It runs at start, and after fsnotify
// lost events.
func (o *Outbox) rescan(now time.Time) error {
	if o.gone {
		return nil // watchAgain lists the folder once it is back
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !offerable(e.Type()) || o.ignored(name) || o.isOffered(name) || o.pending[name] != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		o.pending[name] = &candidate{
			due: now.Add(o.quiet), looked: true,
			stamp: stamp{size: fi.Size(), mtime: fi.ModTime()},
		}
	}
	return nil
}

// watchError handles an error from fsnotify. Lost events may have hidden
// new files, so an overflow rescans the folder; the rest are logged and
// watching goes on.
func (o *Outbox) watchError(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		o.log.Warn("outbox watch lost events; rescanning the folder", slog.Any(logkey.Error, err))
		if err := o.rescan(time.Now()); err != nil {
			o.log.Error("outbox rescan", slog.Any(logkey.Error, err))
		}
		return
	}
	o.log.Error("outbox watch", slog.Any(logkey.Error, err))
}

// offerable reports whether a file of mode may be offered: anything but a
// directory or a symbolic link. A named pipe, a socket or a device is
// offered too, although it cannot be sent: the sender refuses it
// (ErrNotRegular, without blocking on it), and Done moves it to failed/
// with that reason, where whoever dropped it sees why, instead of it lying
// in the folder unexplained.
func offerable(mode fs.FileMode) bool {
	return mode&(fs.ModeDir|fs.ModeSymlink) == 0
}

// ignored reports whether a name in the folder is never a file to offer.
func (o *Outbox) ignored(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, partSuffix) ||
		name == SentDir || name == FailedDir
}

func (o *Outbox) isOffered(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.offered[name]
}

// FinishOutboxFile does what Done does, for a file an Outbox in cfg.Dir
// offered but that no Outbox watches any more: its folder was removed
// from the configuration, or the process restarted without it, while the
// file's transfer ran. Nothing is watched or started.
func FinishOutboxFile(cfg OutboxConfig, path string, sent FileID, err error, after string) error {
	o, oerr := newOutbox(cfg, func(string) {})
	if oerr != nil {
		return oerr
	}
	return o.Done(path, sent, err, after)
}

// Done records the outcome of the transfer of path, a file the Outbox
// offered, whose version sent is the FileID taken when its transfer
// began. With err nil, the file moves into sent/ (after AfterSent or
// "") or is deleted (AfterDelete). With an error, it moves into failed/,
// and failed/<name>.reason holds the error's text. A sent/ or failed/
// removed since the Outbox started is created again. A name already in sent/
// or failed/ is kept: the file gets the next free one ("report (1).csv"),
// and its reason file follows that name. Once Done returns nil, a new
// file under the same name in the outbox is a new file to offer.
//
// A symbolic link or a folder found under the name when err wraps
// ErrNotRegular (put there after the file was offered) is left where it
// is, as the Outbox leaves any link or folder, and Done returns nil.
//
// Only the version sent leaves the folder. Another file found under the
// name (renamed in over it, or written to, after its transfer began) is
// left where it is and offered as a new file once it is quiet; Done then
// returns nil. A zero sent takes the file under the name as the one sent.
func (o *Outbox) Done(path string, sent FileID, err error, after string) error {
	name := filepath.Base(path)
	if filepath.Dir(filepath.Clean(path)) != o.dir || o.ignored(name) {
		return fmt.Errorf("outbox %s: done %s: %w", o.dir, path, ErrNotInOutbox)
	}
	if after != "" && after != AfterSent && after != AfterDelete {
		return fmt.Errorf("outbox %s: done %s: after is %q, want %q or %q", o.dir, path, after, AfterSent, AfterDelete)
	}
	src := filepath.Join(o.dir, name)
	if errors.Is(err, ErrNotRegular) {
		if fi, lerr := os.Lstat(src); lerr == nil && !offerable(fi.Mode()) {
			// A link or a folder was put under the name after the file
			// was found complete (the sender refused it, and read nothing
			// through it): left alone, as one found there at a look.
			o.mu.Lock()
			delete(o.offered, name)
			o.mu.Unlock()
			o.log.Warn("a symbolic link or folder was put under the name of a file to send; it was not read, and is left alone",
				slog.String(logkey.File, name), slog.Any(logkey.Reason, err))
			return nil
		}
	}
	var derr error
	switch {
	case err != nil:
		derr = o.moveFailed(src, name, sent, err)
	case after == AfterDelete:
		derr = removeSame(src, sent)
	default:
		if derr = o.makeSub(o.sent); derr == nil {
			_, derr = moveUnique(src, o.sent, name, sent)
		}
	}
	o.mu.Lock()
	if derr == nil || errors.Is(derr, errReplaced) {
		delete(o.offered, name)
		delete(o.stuck, name)
	} else {
		tries := o.stuck[name].tries + 1
		o.stuck[name] = stuckFile{due: time.Now().Add(o.stuckRetry(tries)), tries: tries}
	}
	o.mu.Unlock()
	if derr != nil && !errors.Is(derr, errReplaced) {
		o.wake() // to schedule the retry
	}
	if errors.Is(derr, errReplaced) {
		attrs := []any{slog.String(logkey.File, name)}
		if err != nil {
			attrs = append(attrs, slog.Any(logkey.Reason, err)) // the sent version's failure
		}
		o.log.Info("the file sent was replaced under its name before its transfer ended; the new file is left in the folder and offered", attrs...)
		o.wake()
		return nil
	}
	if derr != nil {
		return fmt.Errorf("outbox %s: done %s: %w", o.dir, name, derr)
	}
	return nil
}

// wake asks watchLoop to list the folder again, and to schedule its
// timer anew.
func (o *Outbox) wake() {
	select {
	case o.rescanNow <- struct{}{}:
	default: // a rescan is already asked for
	}
}

// stuckFile is a file whose move out of the folder failed: offered again
// at due (zero once it was, until its next Done), after tries failures.
type stuckFile struct {
	due   time.Time
	tries int
}

// stuckRetry is how long a file whose move failed tries times waits
// before it is offered again: 4 quiet periods (8 s by default), doubling
// at each failure up to 10 minutes, so that a cause that lasts costs a
// rename and a log line every 10 minutes.
func (o *Outbox) stuckRetry(tries int) time.Duration {
	d := 4 * o.quiet
	for i := 1; i < tries && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

// retryStuck offers again each stuck file whose wait is over, as a
// candidate that is offered after one more look: its record says it was
// sent, so only its move is tried again (see Node.sendOutboxFile).
func (o *Outbox) retryStuck(now time.Time) {
	o.mu.Lock()
	var due []string
	for name, sf := range o.stuck {
		if !sf.due.IsZero() && !sf.due.After(now) {
			due = append(due, name)
			sf.due = time.Time{}
			o.stuck[name] = sf
			delete(o.offered, name)
		}
	}
	o.mu.Unlock()
	for _, name := range due {
		fi, err := os.Lstat(filepath.Join(o.dir, name))
		if err != nil || !offerable(fi.Mode()) {
			o.mu.Lock()
			delete(o.stuck, name) // gone meanwhile: nothing left to move
			o.mu.Unlock()
			continue
		}
		if o.pending[name] == nil {
			o.pending[name] = &candidate{due: now.Add(o.quiet), looked: true, stamp: stamp{size: fi.Size(), mtime: fi.ModTime()}}
		}
	}
}

// makeSub creates sub, the outbox's sent/ or failed/, if it is missing:
// a cleanup job that empties it may remove it while the node runs, and a
// file that cannot leave the folder is a file that may be sent again.
// Only sub itself is made, never the outbox folder: one that is gone is
// not brought back here.
func (o *Outbox) makeSub(sub string) error {
	err := os.Mkdir(sub, 0o750)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	o.log.Warn("outbox subfolder was missing; created it again", slog.String(logkey.Path, sub))
	return durable.SyncDir(o.dir)
}

// errReplaced is returned by the moves of Done when the file under the
// name is not the version that was sent.
var errReplaced = errors.New("another file is under the name")

// checkSame returns errReplaced if the file at path is not the version
// sent (a zero sent matches any file). A file that is gone is left to the
// caller's own error.
func checkSame(path string, sent FileID) error {
	if sent.IsZero() {
		return nil
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if !sent.Same(fi) {
		return errReplaced
	}
	return nil
}

// removeSame removes path if it is the version sent.
func removeSame(path string, sent FileID) error {
	if err := checkSame(path, sent); err != nil {
		return err
	}
	return os.Remove(path)
}

// moveFailed moves src into failed/ and writes the reason beside it. The
// name chosen is one whose reason name is free too: a failed file named
// "report.reason" may already be there, and the reason of a failed
// "report" must not replace it.
func (o *Outbox) moveFailed(src, name string, sent FileID, reason error) error {
	// One at a time: both names are found free together, and must stay so
	// until both are written.
	o.failMu.Lock()
	defer o.failMu.Unlock()
	if err := o.makeSub(o.failed); err != nil {
		return err
	}
	dst, err := moveUniqueWhere(src, o.failed, name, sent, maxFailedNameLen, reasonFree)
	if dst == "" {
		return err
	}
	o.log.Warn("file failed", slog.String(logkey.File, name), slog.String(logkey.Path, dst), slog.Any(logkey.Reason, reason))
	if werr := writeFileAtomic(reasonPath(dst), []byte(reason.Error()+"\n")); werr != nil {
		return werr
	}
	return err // nil, or errReplaced: the new file under the name is offered
}

// maxFailedNameLen is the longest name of a file in failed/: its reason
// file's name, and the temp name that one is written under
// ("<name>.reason.tmp"), must fit in MaxNameLen too, so a longer name is
// shortened there, as a name is for "report (1).csv".
const maxFailedNameLen = MaxNameLen - len(".reason.tmp")

// reasonPath is the path of the reason file of the failed file at dst.
func reasonPath(dst string) string { return dst + ".reason" }

// reasonFree reports whether the reason name of a failed file at dst is
// free.
func reasonFree(dst string) bool {
	_, err := os.Lstat(reasonPath(dst))
	return errors.Is(err, fs.ErrNotExist)
}

// moveUnique moves src into dir under name or its first free variant,
// never replacing a file, and returns the new path. With sent not zero,
// only that version of the file moves (errReplaced otherwise): the new
// name is checked once linked, so what lands there is the file sent, and
// src is checked again just before it is removed.
func moveUnique(src, dir, name string, sent FileID) (string, error) {
	return moveUniqueWhere(src, dir, name, sent, MaxNameLen, nil)
}

// moveUniqueWhere is moveUnique for names of at most maxLen bytes,
// skipping the names for which free, when not nil, is false (see
// placeUniqueWhere).
func moveUniqueWhere(src, dir, name string, sent FileID, maxLen int, free func(string) bool) (string, error) {
	if err := checkSame(src, sent); err != nil {
		return "", err
	}
	dst, err := placeUniqueWhere(src, dir, name, maxLen, free)
	if err != nil {
		return "", err
	}
	if err := checkSame(dst, sent); err != nil {
		if rerr := os.Remove(dst); rerr != nil {
			return "", rerr
		}
		return "", err
	}
	// Replaced between the link and here: the version sent is in dir
	// already, and the new file stays, to be offered (errReplaced).
	replaced := removeSame(src, sent)
	if replaced != nil && !errors.Is(replaced, errReplaced) && !errors.Is(replaced, fs.ErrNotExist) {
		return "", replaced
	}
	if err := durable.SyncDir(dir); err != nil {
		return "", err
	}
	if err := durable.SyncDir(filepath.Dir(src)); err != nil {
		return "", err
	}
	if errors.Is(replaced, errReplaced) {
		return dst, replaced
	}
	return dst, nil
}

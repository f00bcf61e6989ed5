package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/petrelmq/petrel/internal/logkey"
)

// DefaultDebounce is how long a Watcher waits after the last event on the
// file before it reloads. Editors save in bursts of events (truncate, write,
// chmod; or write a temp file, rename it over, remove a backup) within a few
// milliseconds; 200ms takes in a whole burst and still feels immediate.
const DefaultDebounce = 200 * time.Millisecond

// ErrEmpty is returned (to OnError, and by LastError) when a reload finds
// the file empty. That is almost always an editor caught between truncating
// and writing the file, so the running configuration stays, where a start
// with an empty file would take the defaults. To go back to the defaults on
// a running node, leave a comment in the file.
var ErrEmpty = errors.New("configuration file is empty")

// ErrWatchLost is returned (to OnError, and by LastError) when the directory
// of the file is removed or renamed. The watcher sees no change after that;
// the running configuration stays. Restart the node, or Close the Watcher
// and Watch again.
var ErrWatchLost = errors.New("configuration directory is gone; no longer watching")

// WatchOptions configures Watch. The zero value is valid.
type WatchOptions struct {
	// Debounce is how long the file must be quiet before a reload. Every
	// event on the file restarts the wait, so a burst of events gives one
	// reload. Zero or less means DefaultDebounce.
	Debounce time.Duration
	// Logger receives the watcher's logs, with component=conf. Nil means
	// slog.Default().
	Logger *slog.Logger
	// OnChange is called after a reload that changed the configuration,
	// with the previous and the new File and what differs. diff.Restart
	// compares new with the File the watcher started with, so it lists every
	// restart key still pending, not only those of this edit; an edit that
	// puts such a key back to its running value clears it. See Diff for
	// what the callee must apply. Nil means no callback.
	//
	// An error says that the callee applied none of it: old stays Current,
	// the Version does not move, LastError returns the error, and the next
	// event on the file, a touch included, offers the change again (an
	// outbox folder made after the edit that names it is then watched).
	OnChange func(old, new *File, diff Diff) error
	// OnError is called when a reload is refused (the file is invalid,
	// empty, missing or unreadable) or the watch is lost. The error is
	// already logged; OnError is for the caller's state, such as what
	// `petrel stat` shows. A bad file's error is an *Error with the file,
	// line and reason. Nil means no callback.
	OnError func(err error)
	// OnCleared is called when a reload after a refusal (LastError not
	// nil, from OnError's errors or OnChange's) finds the file configuring
	// what runs, as when the edit is put back: LastError is nil again.
	// Nil means no callback.
	OnCleared func()
	// Now is the clock of LastReload. Nil means time.Now.
	Now func() time.Time
	// Running is the File the caller runs, when it read the file before
	// Watch: a node opens with it, and a backup may wait days for its
	// lock in between. Watch then takes Running, not the file on disk, as
	// Current at Version 1 and as the baseline of Diff.Restart, and reads
	// the file at once as a reload: what was saved meanwhile comes to
	// OnChange, and a file that is invalid or missing by then to OnError,
	// rather than being taken as what runs. Nil means the first load.
	Running *File
}

// Watcher watches a configuration file and reloads it after it changes. It
// watches the file's directory, not the file: editors save by renaming a new
// file over the old one, or swap a symlink, and a watch on the old file
// would not see the new one. Events on other names in the directory are
// ignored, except where the file is a symlink (see relevant).
//
// Watch starts one goroutine, watchLoop; Close stops it and waits for it.
// OnChange and OnError are called from watchLoop, one call at a time and in
// the order of the reloads; they must not call Close. The other methods are
// safe to call from any goroutine, callbacks included.
type Watcher struct {
	path      string // as given to Watch, for errors and logs
	abs       string // absolute, to match events
	dir       string // the watched directory
	debounce  time.Duration
	onChange  func(old, new *File, diff Diff) error
	onError   func(err error)
	onCleared func()
	now       func() time.Time
	log       *slog.Logger
	src       eventSource

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// Owned by watchLoop after Watch returns.
	running *File  // what the process started with: the baseline of Diff.Restart
	target  string // where the file's symlink led at the last read; "" if not a symlink
	catchUp bool   // Running was given: reload once before waiting for events
	// secrets are the files the configuration reads secrets from (see
	// secretFiles), by absolute path, each with where it led if it was a
	// symlink at the last read (else ""); watched the directories they are
	// in. Both are kept from the last file that parsed.
	secrets map[string]string
	watched map[string]bool

	reloads atomic.Int64 // reload attempts, for tests

	mu         sync.Mutex
	current    *File
	version    int
	lastReload time.Time
	lastError  error
}

// eventSource is where the events come from: fsnotify, or a test.
type eventSource struct {
	events <-chan fsnotify.Event
	errors <-chan error
	close  func() error
	// add watches one more directory; nil when the source cannot (a
	// test's).
	add func(dir string) error
}

// Watch loads the file at path and watches it for changes. The first load
// must succeed: its error (an *Error for a bad file; one that wraps
// fs.ErrNotExist for a missing one) is returned, and nothing is started.
// Current then holds the loaded File, at Version 1. With opts.Running, there
// is no first load: the file is reloaded at once instead (see Running).
//
// The directory is watched before the first load, so an edit made while
// the caller starts its node from Current is reloaded, not missed; OnChange
// may therefore be called as soon as Watch returns.
func Watch(path string, opts WatchOptions) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch config %s: %w", path, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config %s: %w", path, err)
	}
	if err := fsw.Add(filepath.Dir(abs)); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch config %s: %w", path, err)
	}
	w := newWatcher(path, abs, opts, eventSource{events: fsw.Events, errors: fsw.Errors, close: fsw.Close, add: fsw.Add})
	if err := w.start(); err != nil {
		fsw.Close()
		return nil, err
	}
	return w, nil
}

func newWatcher(path, abs string, opts WatchOptions, src eventSource) *Watcher {
	w := &Watcher{
		path: path, abs: abs, dir: filepath.Dir(abs),
		debounce: opts.Debounce, onChange: opts.OnChange, onError: opts.OnError, onCleared: opts.OnCleared,
		now: opts.Now, log: opts.Logger, src: src,
		stop: make(chan struct{}), running: opts.Running,
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.log = w.log.With(slog.String(logkey.Component, "conf"), slog.String(logkey.Path, path))
	return w
}

// start loads the file the first time and starts watchLoop.
func (w *Watcher) start() error {
	f := w.running
	if f == nil {
		var err error
		if f, err = w.read(false); err != nil {
			return err
		}
	} else {
		// The caller read the file before Watch; it may have changed since.
		w.catchUp = true
		w.watchSecrets(f)
	}
	w.running, w.current, w.version, w.lastReload = f, f, 1, w.now()
	w.log.Info("watching config", slog.String("dir", w.dir), slog.Duration("debounce", w.debounce))
	w.wg.Add(1)
	go w.watchLoop()
	return nil
}

// Close stops watching and waits for watchLoop to return. A reload that was
// waiting for its debounce is dropped. Close is idempotent; it must not be
// called from OnChange or OnError.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		w.wg.Wait()
		w.closeErr = w.src.close()
		w.log.Debug("stopped watching config")
	})
	return w.closeErr
}

// Current returns the configuration last loaded successfully: the one
// passed as new to the last OnChange that returned nil, or the first one.
// Restart keys in it may differ from what the process runs (see OnChange).
func (w *Watcher) Current() *File {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// Version returns how many configurations have been loaded: 1 for the first,
// plus one for each reload that changed it (each OnChange that returned
// nil). A reload that finds the same configuration, or is refused, does not
// count.
func (w *Watcher) Version() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// LastReload returns when Current was loaded.
func (w *Watcher) LastReload() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastReload
}

// LastError returns why the last reload was refused, or nil once a reload
// succeeds again: it is the current problem, not a history. Non-nil means
// the file on disk is not what runs (the log keeps the history).
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastError
}

// watchLoop turns events into debounced reloads until Close.
func (w *Watcher) watchLoop() {
	defer w.wg.Done()
	debounce := time.NewTimer(w.debounce)
	debounce.Stop()
	defer debounce.Stop()
	events, errs := w.src.events, w.src.errors
	if w.catchUp {
		w.reload()
	}
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			w.event(ev, debounce)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.sourceError(err, debounce)
		case <-debounce.C:
			w.reload()
		}
	}
}

// event (re)starts the debounce for an event that concerns the file. A file
// that was removed or renamed away is not an error here: the reload, once
// the debounce has passed, decides whether it is still missing.
func (w *Watcher) event(ev fsnotify.Event, debounce *time.Timer) {
	if filepath.Clean(ev.Name) == w.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		debounce.Stop()
		w.refuse(fmt.Errorf("watch config %s: %w", w.path, ErrWatchLost))
		return
	}
	if w.relevant(ev) {
		debounce.Reset(w.debounce)
	}
}

// relevant reports whether an event in the directory may have changed the
// file: an event on its name (any kind: a chmod after touch is a request to
// re-read), or, where the file is a symlink, on its target in this
// directory, or any event after which the symlink leads elsewhere (a
// Kubernetes ConfigMap swaps a "..data" link two levels up the chain). A
// target in another directory is read at each reload but not watched.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	switch {
	case name == w.abs:
		return true
	case w.secretChanged(name):
		return true
	case w.target == "":
		return false
	case name == w.target:
		return true
	default:
		return resolve(w.abs) != w.target
	}
}

// secretChanged reports whether an event on name may have changed a file
// the configuration reads a secret from, by the same rules as the file
// itself: its name, or where it is a symlink, its target or any event in
// its directory after which it leads elsewhere (a Kubernetes secret
// volume swaps a "..data" link, as a ConfigMap does).
func (w *Watcher) secretChanged(name string) bool {
	for path, target := range w.secrets {
		switch {
		case name == path:
			return true
		case target == "":
		case name == target:
			return true
		case filepath.Dir(name) == filepath.Dir(path) && resolve(path) != target:
			return true
		}
	}
	return false
}

// watchSecrets notes the secret files of f and watches their directories,
// so that a secret rotated by rewriting its file, without touching the
// configuration, is reloaded too. A directory that cannot be watched (it
// does not exist yet) is logged once per reload: the file is still read at
// every reload of the configuration.
func (w *Watcher) watchSecrets(f *File) {
	w.secrets = make(map[string]string)
	for _, path := range f.secretFiles() {
		abs, err := filepath.Abs(path)
		if err != nil {
			continue
		}
		w.secrets[abs] = resolve(abs)
		dir := filepath.Dir(abs)
		if dir == w.dir || w.watched[dir] || w.src.add == nil {
			continue
		}
		if err := w.src.add(dir); err != nil {
			w.log.Warn("cannot watch a secret file's directory; touch the configuration after changing the file",
				slog.String("dir", dir), slog.Any(logkey.Error, err))
			continue
		}
		if w.watched == nil {
			w.watched = make(map[string]bool)
		}
		w.watched[dir] = true
	}
}

// sourceError handles an error from fsnotify. Lost events may have hidden a
// change, so an overflow reloads; the rest are logged and watching goes on.
func (w *Watcher) sourceError(err error, debounce *time.Timer) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.log.Warn("config watch lost events; reloading to catch up", slog.Any(logkey.Error, err))
		debounce.Reset(w.debounce)
		return
	}
	w.log.Error("config watch", slog.Any(logkey.Error, err))
}

// reload reads the file again, after the debounce, and reports the outcome.
func (w *Watcher) reload() {
	w.reloads.Add(1)
	next, err := w.read(true)
	if err != nil {
		w.refuse(err)
		return
	}
	w.mu.Lock()
	old := w.current
	refused := w.lastError != nil
	w.lastError = nil
	w.mu.Unlock()
	diff := Compare(old, next)
	if diff.Empty() {
		w.log.Debug("config reloaded, unchanged")
		if refused && w.onCleared != nil {
			w.onCleared()
		}
		return
	}
	diff.Restart = Compare(w.running, next).Restart
	// current moves only once the change runs: a change the callee could
	// not apply is compared again, and offered again, at the next event.
	if w.onChange != nil {
		if err := w.onChange(old, next, diff); err != nil {
			w.mu.Lock()
			w.lastError = err
			w.mu.Unlock()
			w.log.Warn("config not applied; keeping the running one", slog.Any(logkey.Error, err))
			return
		}
	}
	w.mu.Lock()
	w.current, w.lastReload = next, w.now()
	w.version++
	version := w.version
	w.mu.Unlock()

	w.log.Info("config reloaded", slog.Int(logkey.Version, version), slog.Any(logkey.Changed, diff.Changed))
	if diff.NeedsRestart() {
		w.log.Warn("config changes need a restart; not applied", slog.Any(logkey.Restart, diff.Restart))
	}
}

// refuse keeps the running configuration and reports why.
func (w *Watcher) refuse(err error) {
	w.mu.Lock()
	w.lastError = err
	w.mu.Unlock()
	w.log.Warn("config refused; keeping the running one", slog.Any(logkey.Error, err))
	if w.onError != nil {
		w.onError(err)
	}
}

// read loads the file as Load does. On a reload an empty file is refused
// (ErrEmpty) instead of meaning the defaults.
func (w *Watcher) read(reload bool) (*File, error) {
	w.target = resolve(w.abs)
	data, err := os.ReadFile(w.abs)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if reload && len(data) == 0 {
		return nil, &Error{File: w.path, Reason: "the file is empty (an editor between truncating and writing it?); " +
			"the running configuration stays. To go back to the defaults, leave a comment in the file", Err: ErrEmpty}
	}
	f, err := Parse(w.path, data)
	if err == nil {
		w.watchSecrets(f)
	}
	return f, err
}

// resolve returns where the symlink at path leads, or "" when path is not a
// symlink or leads nowhere.
func resolve(path string) string {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	return target
}

// secretFiles returns the paths of the files f reads secrets from, as
// written: the shared secret's, each neighbour's and each identity's
// secret_file, and the admin token_file.
func (f *File) secretFiles() []string {
	var paths []string
	add := func(p string) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	add(f.SecretFile)
	for _, n := range f.Nodes {
		add(n.SecretFile)
	}
	for _, p := range f.Peers {
		add(p.SecretFile)
	}
	add(f.Admin.TokenFile)
	return paths
}

package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
	"go.uber.org/goleak"
)

// These tests use real files and real fsnotify, with a short debounce. They
// never sleep to wait for an event: they poll for the outcome, with a
// deadline. To check that a save gave exactly one reload, each test saves
// once more afterwards (the barrier, an atomic rename) and waits for that
// reload: every event of the first save was delivered before the barrier's,
// so a second reload of the first save would show up as a third reload.
// The debounce itself is tested on a fake clock in watch_loop_test.go.

const testDebounce = 150 * time.Millisecond

// configDoc is a valid file that differs from another by its window.
func configDoc(window int) string {
	return fmt.Sprintf("node: {name: n1}\nlink:\n  window: %d\n", window)
}

// recorder records a Watcher's callbacks.
type recorder struct {
	mu      sync.Mutex
	changes []recordedChange
	errs    []error
}

type recordedChange struct {
	old, new *File
	diff     Diff
}

func (r *recorder) onChange(old, new *File, diff Diff) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, recordedChange{old, new, diff})
	return nil
}

func (r *recorder) onError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *recorder) snapshot() ([]recordedChange, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slicesClone(r.changes), slicesClone(r.errs)
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

func (r *recorder) waitChanges(t *testing.T, n int) []recordedChange {
	t.Helper()
	petreltest.Eventually(t, fmt.Sprintf("%d OnChange calls", n), func() bool { c, _ := r.snapshot(); return len(c) >= n })
	c, _ := r.snapshot()
	return c
}

func (r *recorder) waitErrors(t *testing.T, n int) []error {
	t.Helper()
	petreltest.Eventually(t, fmt.Sprintf("%d OnError calls", n), func() bool { _, e := r.snapshot(); return len(e) >= n })
	_, e := r.snapshot()
	return e
}

// startWatch watches path, which must exist, and closes the Watcher at the
// end of the test.
func startWatch(t *testing.T, path string) (*Watcher, *recorder) {
	t.Helper()
	r := &recorder{}
	w, err := Watch(path, WatchOptions{
		Debounce: testDebounce,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange: r.onChange,
		OnError:  r.onError,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w, r
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver saves content as editors that care do: write a temporary file
// next to path, then rename it over path.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestEditorSaves saves a new version of the file in each way editors and
// deployment tools do, and checks that each save gives exactly one reload.
func TestEditorSaves(t *testing.T) {
	tests := []struct {
		name string
		// setup makes the file at dir/petrel.yaml with content; nil writes
		// it plainly.
		setup func(t *testing.T, dir, content string)
		save  func(t *testing.T, path, content string)
	}{
		{"write in place", nil, writeFile},
		{"rename over", nil, renameOver},
		{"truncate then write", nil, func(t *testing.T, path, content string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(content); err != nil {
				t.Fatal(err)
			}
		}},
		{"three quick writes", nil, func(t *testing.T, path, content string) {
			writeFile(t, path, configDoc(100))
			writeFile(t, path, configDoc(101))
			writeFile(t, path, content)
		}},
		{"vim backup rename", nil, func(t *testing.T, path, content string) {
			// vim's default on Linux with backupcopy=no: move the file to
			// a backup, write a new one, delete the backup.
			if err := os.Rename(path, path+"~"); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, content)
			if err := os.Remove(path + "~"); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete and recreate", nil, func(t *testing.T, path, content string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, content)
		}},
		{"symlink replaced", func(t *testing.T, dir, content string) {
			writeFile(t, filepath.Join(dir, "v0.yaml"), content)
			symlink(t, "v0.yaml", filepath.Join(dir, "petrel.yaml"))
		}, func(t *testing.T, path, content string) {
			dir := filepath.Dir(path)
			writeFile(t, filepath.Join(dir, "v1.yaml"), content)
			symlink(t, "v1.yaml", filepath.Join(dir, "link.tmp"))
			if err := os.Rename(filepath.Join(dir, "link.tmp"), path); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink target written", func(t *testing.T, dir, content string) {
			writeFile(t, filepath.Join(dir, "real.yaml"), content)
			symlink(t, "real.yaml", filepath.Join(dir, "petrel.yaml"))
		}, func(t *testing.T, path, content string) {
			renameOver(t, filepath.Join(filepath.Dir(path), "real.yaml"), content)
		}},
		{"kubernetes configmap swap", func(t *testing.T, dir, content string) {
			// A ConfigMap volume: petrel.yaml → ..data/petrel.yaml, and
			// ..data → a timestamped directory that an update replaces.
			if err := os.Mkdir(filepath.Join(dir, "..v0"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "..v0", "petrel.yaml"), content)
			symlink(t, "..v0", filepath.Join(dir, "..data"))
			symlink(t, filepath.Join("..data", "petrel.yaml"), filepath.Join(dir, "petrel.yaml"))
		}, func(t *testing.T, path, content string) {
			dir := filepath.Dir(path)
			if err := os.Mkdir(filepath.Join(dir, "..v1"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "..v1", "petrel.yaml"), content)
			symlink(t, "..v1", filepath.Join(dir, "..data_tmp"))
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(dir, "..v0")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "petrel.yaml")
			if tt.setup != nil {
				tt.setup(t, dir, configDoc(1))
			} else {
				writeFile(t, path, configDoc(1))
			}
			w, r := startWatch(t, path)

			start := time.Now()
			tt.save(t, path, configDoc(2))
			if d := time.Since(start); d > testDebounce/2 {
				// Its steps were not one burst: the watcher may
				// rightly have reloaded between them.
				t.Skipf("the save took %v, more than half the %v debounce: the machine is too busy for this case", d, testDebounce)
			}
			c := r.waitChanges(t, 1)
			if c[0].old.Link.Window != 1 || c[0].new.Link.Window != 2 {
				t.Errorf("OnChange window %d → %d, want 1 → 2", c[0].old.Link.Window, c[0].new.Link.Window)
			}
			if want := (Diff{Restart: []string{"link.window"}}); !reflect.DeepEqual(c[0].diff, want) {
				t.Errorf("diff = %#v, want %#v", c[0].diff, want)
			}

			// The barrier: after it, a second reload of the save above
			// would make three.
			renameOver(t, path, configDoc(3))
			c = r.waitChanges(t, 2)
			_, errs := r.snapshot()
			if len(c) != 2 || c[1].new.Link.Window != 3 || w.reloads.Load() != 2 || len(errs) != 0 {
				t.Errorf("after the save and the barrier: %d OnChange (last window %d), %d reloads, errors %v; want 2 OnChange (window 3), 2 reloads, no error",
					len(c), c[len(c)-1].new.Link.Window, w.reloads.Load(), errs)
			}
			if w.Version() != 3 || w.Current() != c[1].new || w.LastError() != nil {
				t.Errorf("Version %d, Current window %d, LastError %v; want 3, 3, nil", w.Version(), w.Current().Link.Window, w.LastError())
			}
		})
	}
}

// TestBadEdit checks that an edit that Load refuses keeps the running
// configuration, reports the file and line, and that the next good edit is
// loaded as usual.
func TestBadEdit(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		field string
		line  int
	}{
		{"broken YAML", "node: {name: n1}\nlink:\n  window: 2\n   bad: [\n", "", 4},
		{"invalid value", "node: {name: n1}\nlink:\n  window: 0\n", "link.window", 3},
		{"unknown key", "node: {name: n1}\nlink:\n  windw: 2\n", "link.windw", 3},
		{"impossible route", "node: {name: n1}\nnodes:\n  - {name: hub-1, connector: 'tcp://h:1'}\nroutes:\n  - node: far\n    via: nowhere\n",
			"routes[0].via", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "petrel.yaml")
			writeFile(t, path, configDoc(1))
			w, r := startWatch(t, path)
			first, loaded := w.Current(), w.LastReload()

			renameOver(t, path, tt.doc)
			errs := r.waitErrors(t, 1)
			var e *Error
			if !errors.As(errs[0], &e) || !errors.Is(errs[0], ErrInvalid) {
				t.Fatalf("OnError(%v), want an *Error that wraps ErrInvalid", errs[0])
			}
			if e.File != path || e.Line != tt.line || e.Field != tt.field || e.Reason == "" {
				t.Errorf("error %q: file %q line %d field %q; want %q, %d, %q", e, e.File, e.Line, e.Field, path, tt.line, tt.field)
			}
			if w.Current() != first || w.Version() != 1 || !w.LastReload().Equal(loaded) || w.LastError() != errs[0] {
				t.Errorf("after a bad edit: Version %d, LastError %v, Current changed %v; want the first configuration kept",
					w.Version(), w.LastError(), w.Current() != first)
			}

			renameOver(t, path, configDoc(2))
			c := r.waitChanges(t, 1)
			if c[0].old != first || c[0].new.Link.Window != 2 {
				t.Errorf("recovery OnChange from window %d to %d, want 1 to 2", c[0].old.Link.Window, c[0].new.Link.Window)
			}
			if w.Version() != 2 || w.LastError() != nil || !w.LastReload().After(loaded) {
				t.Errorf("after recovery: Version %d, LastError %v, LastReload advanced %v; want 2, nil, true",
					w.Version(), w.LastError(), w.LastReload().After(loaded))
			}
			if _, errs := r.snapshot(); len(errs) != 1 {
				t.Errorf("OnError called %d times, want 1: %v", len(errs), errs)
			}
		})
	}
}

// TestFileMissing checks that a file deleted for good is reported once the
// debounce has passed, and that recreating it recovers.
func TestFileMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	writeFile(t, path, configDoc(1))
	w, r := startWatch(t, path)
	first := w.Current()

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	errs := r.waitErrors(t, 1)
	if !errors.Is(errs[0], fs.ErrNotExist) || w.Current() != first || w.LastError() == nil {
		t.Errorf("OnError(%v), Current kept %v; want a not-exist error and the first configuration kept", errs[0], w.Current() == first)
	}

	writeFile(t, path, configDoc(2))
	c := r.waitChanges(t, 1)
	if c[0].new.Link.Window != 2 || w.LastError() != nil || w.Version() != 2 {
		t.Errorf("after recreating: window %d, LastError %v, Version %d; want 2, nil, 2", c[0].new.Link.Window, w.LastError(), w.Version())
	}
}

// TestEmptyFile checks that a file left empty is refused rather than taken
// for the defaults, and that the rest of the write recovers.
func TestEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	writeFile(t, path, configDoc(1))
	w, r := startWatch(t, path)

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	errs := r.waitErrors(t, 1)
	var e *Error
	if !errors.Is(errs[0], ErrEmpty) || !errors.As(errs[0], &e) || e.File != path {
		t.Errorf("OnError(%v), want ErrEmpty in an *Error naming %s", errs[0], path)
	}
	if w.Current().Link.Window != 1 {
		t.Errorf("Current window %d, want 1 kept", w.Current().Link.Window)
	}

	// A comment alone is how to ask for the defaults.
	writeFile(t, path, "# defaults\nnode: {name: n1}\n")
	c := r.waitChanges(t, 1)
	if c[0].new.Link.Window != 0 || w.LastError() != nil {
		t.Errorf("after writing: window %d, LastError %v; want 0 (default), nil", c[0].new.Link.Window, w.LastError())
	}
}

// TestRestartKeys checks that a change to listen is reported as needing a
// restart, and stays reported, against the running value, until it is
// reverted.
func TestRestartKeys(t *testing.T) {
	t.Parallel()
	const base = "node: {name: n1}\nlisten: %s\nnodes:\n  - {name: hub-1, connector: 'tcp://h:1'}\nroutes:\n%s"
	const noRoutes = "  []\n"
	const oneRoute = "  - {node: far, via: hub-1}\n"
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	writeFile(t, path, fmt.Sprintf(base, "127.0.0.1:7400", noRoutes))
	w, r := startWatch(t, path)

	steps := []struct {
		listen, routes string
		want           Diff
	}{
		{"127.0.0.1:7500", noRoutes, Diff{Restart: []string{"listen"}}},
		// Still pending, beside a live change.
		{"127.0.0.1:7500", oneRoute, Diff{Restart: []string{"listen"}, Changed: []string{SectionRoutes}}},
		// Back to what runs: nothing pending any more.
		{"127.0.0.1:7400", oneRoute, Diff{}},
	}
	for i, s := range steps {
		renameOver(t, path, fmt.Sprintf(base, s.listen, s.routes))
		c := r.waitChanges(t, i+1)
		got := c[i].diff
		if !reflect.DeepEqual(got, s.want) && !(got.Empty() && s.want.Empty()) {
			t.Errorf("step %d (listen %s): diff %#v, want %#v", i, s.listen, got, s.want)
		}
		if c[i].new.Listen != s.listen || w.Current().Listen != s.listen {
			t.Errorf("step %d: new listen %q, Current %q; want %q (the file as loaded)", i, c[i].new.Listen, w.Current().Listen, s.listen)
		}
	}
}

// TestWatchStartErrors checks that Watch refuses a file it cannot load, and
// starts nothing.
func TestWatchStartErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "link:\n  window: 0\n")
	if _, err := Watch(bad, WatchOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Watch(bad file) = %v, want ErrInvalid", err)
	}
	if _, err := Watch(filepath.Join(dir, "missing.yaml"), WatchOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Watch(missing file) = %v, want fs.ErrNotExist", err)
	}
	if _, err := Watch(filepath.Join(dir, "no-dir", "petrel.yaml"), WatchOptions{}); err == nil {
		t.Error("Watch in a missing directory succeeded")
	}
}

// TestCloseStopsWatchLoop checks that Close ends watchLoop and fsnotify's
// goroutine, with a reload pending, and that Close may be called again.
func TestCloseStopsWatchLoop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	writeFile(t, path, configDoc(1))
	changed := false
	w, err := Watch(path, WatchOptions{Debounce: time.Hour, OnChange: func(*File, *File, Diff) error { changed = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if w.Version() != 1 || w.Current().Link.Window != 1 || w.LastReload().IsZero() || w.LastError() != nil {
		t.Errorf("after Watch: Version %d, window %d, LastReload %v, LastError %v", w.Version(), w.Current().Link.Window, w.LastReload(), w.LastError())
	}
	writeFile(t, path, configDoc(2)) // pending for an hour
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if changed {
		t.Error("OnChange after Close")
	}
}

// TestWatchRunningCatchesUp gives Watch the File the caller runs, read
// before the file was saved again (a backup's wait for its lock): the
// saved file is reloaded at once, against what runs, and its restart keys
// are reported against it too.
func TestWatchRunningCatchesUp(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	running, err := Parse(path, []byte(configDoc(1)))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "node: {name: n1}\nlisten: 127.0.0.1:1\nlink:\n  window: 2\n")
	r := &recorder{}
	w, err := Watch(path, WatchOptions{Debounce: testDebounce, OnChange: r.onChange, OnError: r.onError, Running: running})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := r.waitChanges(t, 1)
	if c[0].old != running || c[0].new.Link.Window != 2 {
		t.Errorf("catch-up OnChange from window %d to %d, want from Running (1) to 2", c[0].old.Link.Window, c[0].new.Link.Window)
	}
	if !reflect.DeepEqual(c[0].diff.Restart, []string{"listen", "link.window"}) {
		t.Errorf("catch-up restart keys %v, want [listen link.window]", c[0].diff.Restart)
	}
	if w.Version() != 2 || w.Current() != c[0].new {
		t.Errorf("after the catch-up: version %d, current is the new file %v", w.Version(), w.Current() == c[0].new)
	}
}

// TestSecretFileRotated changes only a file the configuration reads a
// secret from, in each way a secret is rotated, and checks that the node's
// configuration is reloaded with the new secret, without touching the
// configuration file: the shared secret, and an identity's in peers.
func TestSecretFileRotated(t *testing.T) {
	writeSecret := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// setup makes the secret at path; nil writes it plainly. It
		// returns the path the configuration names.
		setup func(t *testing.T, path, content string) string
		save  func(t *testing.T, path, content string)
	}{
		{"write in place", nil, writeSecret},
		{"rename over", nil, func(t *testing.T, path, content string) {
			tmp := path + ".tmp"
			writeSecret(t, tmp, content)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"kubernetes secret swap", func(t *testing.T, path, content string) string {
			// A secret volume: key → ..data/key, and ..data → a
			// timestamped directory that an update replaces.
			dir := filepath.Dir(path)
			if err := os.Mkdir(filepath.Join(dir, "..v0"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeSecret(t, filepath.Join(dir, "..v0", "key"), content)
			symlink(t, "..v0", filepath.Join(dir, "..data"))
			symlink(t, filepath.Join("..data", "key"), path)
			return path
		}, func(t *testing.T, path, content string) {
			dir := filepath.Dir(path)
			version := ".." + content // a new directory at each update
			if err := os.Mkdir(filepath.Join(dir, version), 0o700); err != nil {
				t.Fatal(err)
			}
			writeSecret(t, filepath.Join(dir, version, "key"), content)
			symlink(t, version, filepath.Join(dir, "..data_tmp"))
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	docs := []struct {
		name   string
		doc    func(secretPath string) string
		secret func(f *File) string
	}{
		{"shared secret", func(p string) string { return "node: {name: n1}\nsecret_file: " + p + "\n" },
			func(f *File) string { return string(f.Secret) }},
		{"identity", func(p string) string {
			return "node: {name: n1}\nlisten: 127.0.0.1:0\npeers:\n  - {name: app-1, kind: client, secret_file: " + p + "}\n"
		}, func(f *File) string { return string(f.Peers[0].Secret) }},
	}
	for _, d := range docs {
		for _, tt := range tests {
			t.Run(d.name+"/"+tt.name, func(t *testing.T) {
				secretPath := filepath.Join(t.TempDir(), "key")
				if tt.setup != nil {
					tt.setup(t, secretPath, "old-secret")
				} else {
					writeSecret(t, secretPath, "old-secret")
				}
				path := filepath.Join(t.TempDir(), "petrel.yaml")
				writeFile(t, path, d.doc(secretPath))
				w, r := startWatch(t, path)
				if got := d.secret(w.Current()); got != "old-secret" {
					t.Fatalf("secret at start: %q", got)
				}
				tt.save(t, secretPath, "new-secret")
				c := r.waitChanges(t, 1)[0]
				if got := d.secret(c.new); got != "new-secret" {
					t.Errorf("secret after the rotation: %q, want new-secret", got)
				}
				want := SectionSecret
				if d.name == "identity" {
					want = SectionPeers
				}
				if !reflect.DeepEqual(c.diff.Changed, []string{want}) {
					t.Errorf("changed %v, want [%s]", c.diff.Changed, want)
				}
				// Once more: the directory stays watched after the first.
				tt.save(t, secretPath, "newer-secret")
				if got := d.secret(r.waitChanges(t, 2)[1].new); got != "newer-secret" {
					t.Errorf("secret after the second rotation: %q, want newer-secret", got)
				}
			})
		}
	}
}

package conf

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// These tests drive watchLoop with events from the test instead of fsnotify,
// inside a synctest bubble, so the debounce runs on a fake clock: each
// time.Sleep below moves that clock, and synctest.Wait lets watchLoop act
// on it, with no real waiting.

// fakeLoop is a Watcher fed by the test.
type fakeLoop struct {
	w      *Watcher
	events chan fsnotify.Event
	errs   chan error
	rec    *recorder
	logs   *petreltest.SyncBuffer
}

const fakeDebounce = 200 * time.Millisecond

// startFake writes configDoc(1) to a file in a new directory and watches it
// with events from the test. Call it inside a bubble; it closes the
// Watcher at the end of the test.
func startFake(t *testing.T) (*fakeLoop, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "petrel.yaml")
	writeFile(t, path, configDoc(1))
	f := &fakeLoop{events: make(chan fsnotify.Event), errs: make(chan error), rec: &recorder{}, logs: &petreltest.SyncBuffer{}}
	f.w = newWatcher(path, path, WatchOptions{
		Debounce: fakeDebounce,
		Logger:   slog.New(slog.NewTextHandler(f.logs, nil)),
		OnChange: f.rec.onChange,
		OnError:  f.rec.onError,
	}, eventSource{events: f.events, errors: f.errs, close: func() error { return nil }})
	if err := f.w.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.w.Close() })
	return f, path
}

// after moves the fake clock by d and lets watchLoop catch up.
func after(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (f *fakeLoop) counts() (reloads, changes, errs int) {
	c, e := f.rec.snapshot()
	return int(f.w.reloads.Load()), len(c), len(e)
}

func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, path := startFake(t)
		writeFile(t, path, configDoc(2))
		// Events 150ms apart, each within the debounce of the last.
		for range 4 {
			f.events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
			after(150 * time.Millisecond)
		}
		if r, _, _ := f.counts(); r != 0 {
			t.Fatalf("%d reloads while events kept coming, want 0", r)
		}
		after(fakeDebounce - 150*time.Millisecond)
		if r, c, e := f.counts(); r != 1 || c != 1 || e != 0 {
			t.Fatalf("after the burst: %d reloads, %d changes, %d errors; want 1, 1, 0", r, c, e)
		}
		// Events on other files of the directory do nothing.
		f.events <- fsnotify.Event{Name: path + ".swp", Op: fsnotify.Write}
		f.events <- fsnotify.Event{Name: filepath.Join(filepath.Dir(path), "other.yaml"), Op: fsnotify.Create}
		after(time.Hour)
		if r, _, _ := f.counts(); r != 1 {
			t.Errorf("%d reloads after events on other names, want still 1", r)
		}
	})
}

// TestMissingWithinDebounce checks that a file that is gone for less than
// the debounce is no error, and that one still gone after it is.
func TestMissingWithinDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, path := startFake(t)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		f.events <- fsnotify.Event{Name: path, Op: fsnotify.Remove}
		after(fakeDebounce - time.Millisecond)
		writeFile(t, path, configDoc(2))
		f.events <- fsnotify.Event{Name: path, Op: fsnotify.Create}
		after(fakeDebounce)
		if r, c, e := f.counts(); r != 1 || c != 1 || e != 0 {
			t.Fatalf("delete and recreate: %d reloads, %d changes, %d errors; want 1, 1, 0", r, c, e)
		}

		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		f.events <- fsnotify.Event{Name: path, Op: fsnotify.Remove}
		after(fakeDebounce - time.Millisecond)
		if _, _, e := f.counts(); e != 0 {
			t.Fatalf("%d errors before the debounce passed, want 0", e)
		}
		after(time.Millisecond)
		if _, _, e := f.counts(); e != 1 || !errors.Is(f.w.LastError(), os.ErrNotExist) {
			t.Fatalf("%d errors (LastError %v) once the debounce passed, want 1 not-exist", e, f.w.LastError())
		}
	})
}

// TestSourceErrors checks that fsnotify's errors are logged, that lost
// events cause a reload, and that losing the directory is reported.
func TestSourceErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, path := startFake(t)
		f.errs <- errors.New("inotify went wrong")
		synctest.Wait()
		if logs := f.logs.String(); !strings.Contains(logs, "inotify went wrong") || !strings.Contains(logs, "component=conf") {
			t.Errorf("logs %q do not show the fsnotify error", logs)
		}

		writeFile(t, path, configDoc(2))
		f.errs <- fsnotify.ErrEventOverflow
		after(fakeDebounce)
		if r, c, _ := f.counts(); r != 1 || c != 1 {
			t.Errorf("after an overflow: %d reloads, %d changes; want 1, 1", r, c)
		}

		f.events <- fsnotify.Event{Name: filepath.Dir(path), Op: fsnotify.Remove}
		synctest.Wait()
		if _, _, e := f.counts(); e != 1 || !errors.Is(f.w.LastError(), ErrWatchLost) {
			t.Errorf("after the directory went: %d errors, LastError %v; want 1, ErrWatchLost", e, f.w.LastError())
		}
	})
}

// TestUnchangedReload checks that a reload that finds the same
// configuration (a touch, a comment) calls nothing, and clears LastError.
func TestUnchangedReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		f, path := startFake(t)
		writeFile(t, path, "link: {window: [\n")
		f.events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		after(fakeDebounce)
		if f.w.LastError() == nil {
			t.Fatal("no LastError after a bad edit")
		}
		writeFile(t, path, "# the same as before\n"+configDoc(1))
		f.events <- fsnotify.Event{Name: path, Op: fsnotify.Chmod}
		after(fakeDebounce)
		if r, c, e := f.counts(); r != 2 || c != 0 || e != 1 {
			t.Errorf("%d reloads, %d changes, %d errors; want 2, 0, 1", r, c, e)
		}
		if f.w.LastError() != nil || f.w.Version() != 1 || !f.w.LastReload().Equal(now) {
			t.Errorf("LastError %v, Version %d, LastReload %v; want nil, 1, %v (the start)", f.w.LastError(), f.w.Version(), f.w.LastReload(), now)
		}
	})
}

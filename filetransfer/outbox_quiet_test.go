package filetransfer

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// These tests drive watchLoop with events from the test instead of
// fsnotify, inside a synctest bubble, so the quiet period runs on a fake
// clock: each time.Sleep moves it, and synctest.Wait lets watchLoop act on
// it. What they check is decided by the quiet timer: that a file is not
// offered before it went quiet, and that a .part file never is, however
// long it waits. (fsnotify itself cannot run in a bubble: its reader
// blocks in a system call, which is never durably blocked.) The files are
// real; only their events are the test's.

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeOutbox is an Outbox whose events the test sends.
type fakeOutbox struct {
	o      *Outbox
	got    *offers
	events chan fsnotify.Event
}

// startFake starts an Outbox on dir with events from the test. Call it
// inside a bubble; stop it with stop before the bubble ends.
func startFake(t *testing.T, dir string, quiet time.Duration) *fakeOutbox {
	t.Helper()
	f := &fakeOutbox{got: &offers{}, events: make(chan fsnotify.Event)}
	o, err := newOutbox(OutboxConfig{Dir: dir, Quiet: quiet, Logger: quietLog}, f.got.ready)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.rescan(time.Now()); err != nil {
		t.Fatal(err)
	}
	f.o = o
	o.wg.Add(1)
	go o.watchLoop(f.events, make(chan error))
	return f
}

func (f *fakeOutbox) stop() {
	close(f.o.stop)
	f.o.wg.Wait()
}

func (f *fakeOutbox) send(op fsnotify.Op, name string) {
	f.events <- fsnotify.Event{Name: filepath.Join(f.o.dir, name), Op: op}
	synctest.Wait()
}

// A file written in pieces 100 ms apart, with a quiet period of 300 ms, is
// not offered while it is written, and is offered whole exactly two quiet
// periods after its last write (one to go quiet, one for the second look).
func TestOutboxQuietWaitsForTheLastWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = 300 * time.Millisecond
		dir := t.TempDir()
		f := startFake(t, dir, quiet)
		defer f.stop()
		file, err := os.Create(filepath.Join(dir, "slow.csv"))
		if err != nil {
			t.Fatal(err)
		}
		f.send(fsnotify.Create, "slow.csv")
		piece := randomBytes(t, 4096)
		const pieces = 8
		var lastWrite time.Time
		for i := range pieces {
			if _, err := file.Write(piece); err != nil {
				t.Fatal(err)
			}
			lastWrite = time.Now()
			f.send(fsnotify.Write, "slow.csv")
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if f.got.count("slow.csv") != 0 {
				t.Fatalf("offered after %d of %d pieces", i+1, pieces)
			}
		}
		file.Close()
		time.Sleep(time.Until(lastWrite.Add(2*quiet)) - time.Nanosecond)
		synctest.Wait()
		if f.got.count("slow.csv") != 0 {
			t.Fatal("offered before two quiet periods passed")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if f.got.count("slow.csv") != 1 {
			t.Fatalf("offered %d times two quiet periods after the last write, want once", f.got.count("slow.csv"))
		}
		if _, size := f.got.get("slow.csv"); size != pieces*4096 {
			t.Fatalf("offered with %d bytes, want %d", size, pieces*4096)
		}
	})
}

// A .part file is never offered, however many quiet periods it waits; once
// renamed to its final name it is offered at once, with no quiet period.
func TestOutboxPartWaitsForItsRename(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = 300 * time.Millisecond
		dir := t.TempDir()
		f := startFake(t, dir, quiet)
		defer f.stop()
		part := writeFile(t, dir, "data.json.part", []byte(`{"a":1}`))
		f.send(fsnotify.Create, "data.json.part")
		f.send(fsnotify.Write, "data.json.part")
		time.Sleep(10 * quiet)
		synctest.Wait()
		if all := f.got.all(); len(all) != 0 {
			t.Fatalf("offered %v while only a .part file was there", all)
		}
		if err := os.Rename(part, filepath.Join(dir, "data.json")); err != nil {
			t.Fatal(err)
		}
		f.send(fsnotify.Rename, "data.json.part")
		f.send(fsnotify.Create, "data.json")
		if all := f.got.all(); !slices.Equal(all, []string{"data.json"}) {
			t.Fatalf("offered %v at the rename, want data.json at once", all)
		}
	})
}

// A file that changes between the two looks with no event (some network
// filesystems) is looked at again, one quiet period later, before it is
// offered.
func TestOutboxQuietSecondLookCatchesSilentWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = 300 * time.Millisecond
		dir := t.TempDir()
		f := startFake(t, dir, quiet)
		defer f.stop()
		path := writeFile(t, dir, "nfs.bin", []byte("first"))
		f.send(fsnotify.Create, "nfs.bin")
		time.Sleep(quiet) // the first look records the size
		synctest.Wait()
		if err := os.WriteFile(path, []byte("first and more"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(quiet) // the second look sees it changed
		synctest.Wait()
		if f.got.count("nfs.bin") != 0 {
			t.Fatal("offered although it changed since the first look")
		}
		time.Sleep(quiet)
		synctest.Wait()
		if n := f.got.count("nfs.bin"); n != 1 {
			t.Fatalf("offered %d times a quiet period after the second look, want once", n)
		}
		if _, size := f.got.get("nfs.bin"); size != int64(len("first and more")) {
			t.Fatalf("offered with %d bytes, want the file as changed", size)
		}
	})
}

package filetransfer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// offers records what an Outbox offers: the name, when, and the size of
// the file at that moment.
type offers struct {
	mu    sync.Mutex
	names []string
	at    []time.Time
	sizes []int64
}

func (o *offers) ready(path string) {
	var size int64 = -1
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names = append(o.names, filepath.Base(path))
	o.at = append(o.at, time.Now())
	o.sizes = append(o.sizes, size)
}

// count returns how many times name was offered.
func (o *offers) count(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, x := range o.names {
		if x == name {
			n++
		}
	}
	return n
}

// get returns when name was first offered and its size then.
func (o *offers) get(name string) (time.Time, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := slices.Index(o.names, name)
	return o.at[i], o.sizes[i]
}

func (o *offers) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.names))
}

func watch(t *testing.T, dir string, quiet time.Duration) (*Outbox, *offers) {
	t.Helper()
	got := &offers{}
	o, err := WatchOutbox(OutboxConfig{Dir: dir, Quiet: quiet}, got.ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o, got
}

// TestOutboxWaitsForASlowWriter writes a file in pieces 100 ms apart,
// with a quiet period of 300 ms: it must be offered once, after the last
// piece, whole.
func TestOutboxWaitsForASlowWriter(t *testing.T) {
	dir := t.TempDir()
	_, got := watch(t, dir, 300*time.Millisecond)
	f, err := os.Create(filepath.Join(dir, "slow.csv"))
	if err != nil {
		t.Fatal(err)
	}
	piece := randomBytes(t, 4096)
	const pieces = 8
	for i := 0; i < pieces; i++ {
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
		if got.count("slow.csv") != 0 {
			t.Fatalf("offered after %d of %d pieces", i+1, pieces)
		}
		time.Sleep(100 * time.Millisecond) // the writer's pace, not a wait for an event
	}
	f.Close()
	finished := time.Now()
	petreltest.Eventually(t, "the slow file", func() bool { return got.count("slow.csv") == 1 })
	at, size := got.get("slow.csv")
	if at.Before(finished) || size != pieces*4096 {
		t.Fatalf("offered at %v with %d bytes; the writer finished at %v with %d", at, size, finished, pieces*4096)
	}
}

// TestOutboxPartRenameIsReadyAtOnce: with a quiet period of a minute, a
// .part file renamed to its final name is offered within seconds, and the
// .part file never is.
func TestOutboxPartRenameIsReadyAtOnce(t *testing.T) {
	dir := t.TempDir()
	_, got := watch(t, dir, time.Minute)
	part := writeFile(t, dir, "data.json.part", []byte(`{"a":1}`))
	if err := os.Rename(part, filepath.Join(dir, "data.json")); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the renamed file", func() bool { return got.count("data.json") == 1 })
	if all := got.all(); !slices.Equal(all, []string{"data.json"}) {
		t.Fatalf("offered %v", all)
	}
}

// TestOutboxOffersFilesPresentAtStart: what is in the folder when the
// watch starts is offered, except what is never offered.
func TestOutboxOffersFilesPresentAtStart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", []byte("a"))
	writeFile(t, dir, "b.bin", randomBytes(t, 100_000))
	writeFile(t, dir, "c.txt.part", []byte("still being written"))
	writeFile(t, dir, ".hidden", []byte("editor swap"))
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	os.Symlink(filepath.Join(dir, "a.txt"), filepath.Join(dir, "link"))
	_, got := watch(t, dir, 100*time.Millisecond)
	petreltest.Eventually(t, "the files present at start", func() bool {
		return got.count("a.txt") == 1 && got.count("b.bin") == 1
	})
	if all := got.all(); !slices.Equal(all, []string{"a.txt", "b.bin"}) {
		t.Fatalf("offered %v", all)
	}
	for _, sub := range []string{SentDir, FailedDir} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Fatalf("%s/ not created: %v", sub, err)
		}
	}
}

// TestOutboxOffersOnce: writing to an offered file does not offer it
// again while its transfer runs; once Done moved it away, a new file under
// that name is new.
func TestOutboxOffersOnce(t *testing.T) {
	dir := t.TempDir()
	o, got := watch(t, dir, 100*time.Millisecond)
	path := writeFile(t, dir, "a.txt", []byte("one"))
	petreltest.Eventually(t, "a.txt", func() bool { return got.count("a.txt") == 1 })
	os.WriteFile(path, []byte("one, rewritten"), 0o644)
	// b.txt is offered only after the same quiet period as a.txt's rewrite
	// would have been: once it is, a.txt would have been offered too.
	writeFile(t, dir, "b.txt", []byte("two"))
	petreltest.Eventually(t, "b.txt", func() bool { return got.count("b.txt") == 1 })
	if n := got.count("a.txt"); n != 1 {
		t.Fatalf("a.txt offered %d times during its transfer", n)
	}
	if err := o.Done(path, FileID{}, nil, AfterSent); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "a.txt", []byte("a new a.txt"))
	petreltest.Eventually(t, "the new a.txt", func() bool { return got.count("a.txt") == 2 })
	// Taken away by hand instead of by Done: the next a.txt is new too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "a.txt", []byte("a third a.txt"))
	petreltest.Eventually(t, "the third a.txt", func() bool { return got.count("a.txt") == 3 })
}

func TestOutboxDone(t *testing.T) {
	dir := t.TempDir()
	o, got := watch(t, dir, 50*time.Millisecond)
	for _, n := range []string{"sent.txt", "gone.txt", "bad.txt"} {
		writeFile(t, dir, n, []byte(n))
	}
	os.WriteFile(filepath.Join(dir, SentDir, "sent.txt"), []byte("an older one"), 0o644)
	petreltest.Eventually(t, "the three files", func() bool { return len(got.all()) == 3 })

	if err := o.Done(filepath.Join(dir, "sent.txt"), FileID{}, nil, AfterSent); err != nil {
		t.Fatal(err)
	}
	sameContent(t, filepath.Join(dir, SentDir, "sent (1).txt"), []byte("sent.txt"))
	sameContent(t, filepath.Join(dir, SentDir, "sent.txt"), []byte("an older one"))

	if err := o.Done(filepath.Join(dir, "gone.txt"), FileID{}, nil, AfterDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gone.txt after delete: %v", err)
	}

	why := errors.New("destination refused: disk full at plant-7")
	if err := o.Done(filepath.Join(dir, "bad.txt"), FileID{}, why, AfterSent); err != nil {
		t.Fatal(err)
	}
	sameContent(t, filepath.Join(dir, FailedDir, "bad.txt"), []byte("bad.txt"))
	sameContent(t, filepath.Join(dir, FailedDir, "bad.txt.reason"), []byte(why.Error()+"\n"))

	if names := dirNames(t, dir); !slices.Equal(names, []string{FailedDir, SentDir}) {
		t.Fatalf("outbox after Done: %v", names)
	}
	if err := o.Done(filepath.Join(t.TempDir(), "x"), FileID{}, nil, ""); !errors.Is(err, ErrNotInOutbox) {
		t.Fatalf("Done outside the outbox: %v", err)
	}
	if err := o.Done(filepath.Join(dir, "x"), FileID{}, nil, "archive"); err == nil || !strings.Contains(err.Error(), `"archive"`) {
		t.Fatalf("Done with a bad after: %v", err)
	}
}

// Done moves or deletes only the version of the file that was sent: a
// new file renamed in under the name meanwhile stays, and is offered
// itself, for each outcome.
func TestOutboxDoneLeavesAReplacedFile(t *testing.T) {
	for _, after := range []string{AfterSent, AfterDelete, "failed"} {
		t.Run(after, func(t *testing.T) {
			dir := t.TempDir()
			o, got := watch(t, dir, 50*time.Millisecond)
			path := writeFile(t, dir, "r.bin", []byte("the old report"))
			petreltest.Eventually(t, "r.bin offered", func() bool { return got.count("r.bin") == 1 })
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			sent := FileIDOf(fi)
			writeFile(t, dir, "r.bin.part", []byte("the new report"))
			if err := os.Rename(path+".part", path); err != nil {
				t.Fatal(err)
			}
			var why error
			switch after {
			case "failed":
				after, why = AfterSent, errors.New("another file was put in its place")
			}
			if err := o.Done(path, sent, why, after); err != nil {
				t.Fatal(err)
			}
			sameContent(t, path, []byte("the new report"))
			for _, sub := range []string{SentDir, FailedDir} {
				if names := dirNames(t, filepath.Join(dir, sub)); len(names) != 0 {
					t.Fatalf("%s/ holds %v", sub, names)
				}
			}
			petreltest.Eventually(t, "the new r.bin offered", func() bool { return got.count("r.bin") == 2 })
		})
	}
}

func TestWatchOutboxRefusesBadConfig(t *testing.T) {
	if _, err := WatchOutbox(OutboxConfig{Dir: filepath.Join(t.TempDir(), "missing")}, func(string) {}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
	file := writeFile(t, t.TempDir(), "f", nil)
	if _, err := WatchOutbox(OutboxConfig{Dir: file}, func(string) {}); err == nil {
		t.Fatal("a file as outbox was accepted")
	}
	if _, err := WatchOutbox(OutboxConfig{Dir: t.TempDir()}, nil); err == nil {
		t.Fatal("a nil ready was accepted")
	}
}

// TestOutboxSecondLookCatchesSilentWrites drives the readiness rule with
// a fake clock and hand-made events, on an Outbox that watches nothing: a
// file that changes between the two looks without any event (as through
// mmap or some network filesystems) is not offered until two looks agree.
func TestOutboxSecondLookCatchesSilentWrites(t *testing.T) {
	dir := t.TempDir()
	got := &offers{}
	const q = time.Second
	o, err := newOutbox(OutboxConfig{Dir: dir, Quiet: q}, got.ready)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, "a.bin", []byte("first part"))
	t0 := time.Now()
	o.event(fsnotify.Event{Name: path, Op: fsnotify.Create}, t0)
	o.look(t0.Add(q / 2))
	o.look(t0.Add(q)) // first look: records size and time
	os.WriteFile(path, []byte("first part, and more"), 0o644)
	o.look(t0.Add(2 * q)) // the second look sees a change: starts again
	if got.count("a.bin") != 0 {
		t.Fatal("offered while it changed between two looks")
	}
	o.look(t0.Add(3 * q))
	if _, size := got.get("a.bin"); size != int64(len("first part, and more")) {
		t.Fatalf("offered with %d bytes", size)
	}

	// The rename convention, by its two events.
	writeFile(t, dir, "b.bin", nil)
	o.event(fsnotify.Event{Name: filepath.Join(dir, "b.bin.part"), Op: fsnotify.Rename}, t0)
	o.event(fsnotify.Event{Name: filepath.Join(dir, "b.bin"), Op: fsnotify.Create}, t0)
	if got.count("b.bin") != 1 {
		t.Fatal("a renamed .part file was not offered at once")
	}
	// A Create that follows anything else waits for the quiet period.
	writeFile(t, dir, "c.bin", nil)
	o.event(fsnotify.Event{Name: filepath.Join(dir, "x.bin.part"), Op: fsnotify.Write}, t0)
	o.event(fsnotify.Event{Name: filepath.Join(dir, "c.bin"), Op: fsnotify.Create}, t0)
	if got.count("c.bin") != 0 || o.pending["c.bin"] == nil {
		t.Fatal("a created file was offered without its quiet period")
	}
}

// FinishOutboxFile finishes files of a folder no Outbox watches, as Done
// would: moved to sent/, deleted, or moved to failed/ with the reason; a
// path outside the folder is refused and touches nothing.
func TestFinishOutboxFileWithoutWatching(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"sent.txt", "gone.txt", "bad.txt"} {
		writeFile(t, dir, n, []byte(n))
	}
	cfg := OutboxConfig{Dir: dir}
	if err := FinishOutboxFile(cfg, filepath.Join(dir, "sent.txt"), FileID{}, nil, ""); err != nil {
		t.Fatal(err)
	}
	sameContent(t, filepath.Join(dir, SentDir, "sent.txt"), []byte("sent.txt"))
	if err := FinishOutboxFile(cfg, filepath.Join(dir, "gone.txt"), FileID{}, nil, AfterDelete); err != nil {
		t.Fatal(err)
	}
	why := errors.New("refused at plant-7")
	if err := FinishOutboxFile(cfg, filepath.Join(dir, "bad.txt"), FileID{}, why, AfterSent); err != nil {
		t.Fatal(err)
	}
	sameContent(t, filepath.Join(dir, FailedDir, "bad.txt.reason"), []byte(why.Error()+"\n"))
	if names := dirNames(t, dir); !slices.Equal(names, []string{FailedDir, SentDir}) {
		t.Fatalf("folder after FinishOutboxFile: %v", names)
	}
	other := t.TempDir()
	writeFile(t, other, "x", []byte("x"))
	if err := FinishOutboxFile(cfg, filepath.Join(other, "x"), FileID{}, nil, AfterDelete); !errors.Is(err, ErrNotInOutbox) {
		t.Fatalf("a path outside the folder: %v", err)
	}
	sameContent(t, filepath.Join(other, "x"), []byte("x"))
}

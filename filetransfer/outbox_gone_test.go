package filetransfer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// The watched folder is removed, then made again under the same path (a
// deploy or a cleanup job that recreates it). Its watch went with the
// old folder; the outbox must find the new one, watch it, and offer what
// is dropped into it, also a file put there before it noticed, and give
// it its sent/ and failed/ again.
func TestOutboxFolderRemovedAndMadeAgain(t *testing.T) {
	for _, how := range []string{"removed", "renamed"} {
		t.Run(how, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "out")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			o, got := watch(t, dir, 50*time.Millisecond)
			writeFile(t, dir, "before.txt", []byte("b"))
			petreltest.Eventually(t, "before.txt", func() bool { return got.count("before.txt") == 1 })
			if err := o.Done(filepath.Join(dir, "before.txt"), FileID{}, nil, AfterSent); err != nil {
				t.Fatal(err)
			}
			var err error
			if how == "removed" {
				err = os.RemoveAll(dir)
			} else {
				err = os.Rename(dir, filepath.Join(parent, "out.old"))
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // let the outbox see it go, or not: both must work
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "early.txt", []byte("e"))
			petreltest.Eventually(t, "early.txt, dropped as the folder came back", func() bool { return got.count("early.txt") == 1 })
			writeFile(t, dir, "after.txt", []byte("a"))
			petreltest.Eventually(t, "after.txt", func() bool { return got.count("after.txt") == 1 })
			for _, sub := range []string{SentDir, FailedDir} {
				if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
					t.Fatalf("%s/ not made again: %v", sub, err)
				}
			}
			if all := got.all(); !slices.Equal(all, []string{"after.txt", "before.txt", "early.txt"}) {
				t.Fatalf("offered %v", all)
			}
		})
	}
}

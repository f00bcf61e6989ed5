//go:build unix

package filetransfer

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// mkfifo makes a named pipe in dir. When the test ends, it opens the pipe
// for writing once, which lets an open for reading that blocked on it
// return: a test that fails because something blocked does not leave the
// goroutine behind.
func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseFIFO(path) })
	return path
}

// releaseFIFO opens the named pipe at path for writing and closes it. The
// open fails (ENXIO) when no reader waits, and then there is nothing to
// release.
func releaseFIFO(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// promptly runs f and returns its error, failing the test if f has not
// returned after 10 s: long for a refusal, and short of the node's 30 s
// stop timeout that a blocked open runs into (a named pipe with no writer
// holds a blocking open for ever).
func promptly(t *testing.T, what string, f func() error) error {
	t.Helper()
	return petreltest.Returns(t, what, 10*time.Second, f)
}

// The ways a node reads a file to send, each of which must refuse what is
// not a regular file, saying what it is, and never block on it.
var openers = []struct {
	name string
	open func(path string) error
}{
	{"Describe", func(p string) error { _, err := Describe(p); return err }},
	{"DescribeLater", func(p string) error { _, err := DescribeLater(p); return err }},
	{"DescribeMatching", func(p string) error {
		_, err := DescribeMatching(context.Background(), p, Info{Filename: filepath.Base(p)})
		return err
	}},
	{"OpenSource", func(p string) error {
		s, err := OpenSource(p, Info{Filename: filepath.Base(p)})
		if err == nil {
			s.Close()
		}
		return err
	}},
}

func TestSendingRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, dir, "pipe")
	link := filepath.Join(dir, "link-to-pipe")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct{ path, kind string }{
		{fifo, "a named pipe"},
		{link, "a symbolic link"}, // never followed: what it points to is not judged
		{sock, "a socket"},
		{dir, "a directory"},
	}
	if fi, err := os.Stat(os.DevNull); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cases = append(cases, struct{ path, kind string }{os.DevNull, "a character device"})
	}
	for _, tc := range cases {
		for _, o := range openers {
			t.Run(filepath.Base(tc.path)+"/"+o.name, func(t *testing.T) {
				err := promptly(t, o.name+" of "+tc.path, func() error { return o.open(tc.path) })
				want := tc.kind + ", not a regular file"
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("got %v, want an error naming %s and saying %q (ErrNotRegular)", err, tc.path, want)
				}
			})
		}
	}
}

// A regular file that becomes a named pipe between the check of its path
// and its open (a race with whoever writes the folder) is refused all the
// same: the open does not block, and the open file is checked.
func TestSendingRefusesAFileSwappedForANamedPipe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "swapped")
	t.Cleanup(func() { releaseFIFO(path) })
	refusesSwap(t, dir, func(p string) error { return syscall.Mkfifo(p, 0o644) }, "a named pipe, not a regular file")
}

// A regular file in a folder whose writers are not trusted (an outbox)
// becomes a symbolic link to a file elsewhere between the check of its
// path and its open. The link is refused, not followed: nothing of the
// file it points to is read.
func TestSendingRefusesAFileSwappedForALink(t *testing.T) {
	secret := writeFile(t, t.TempDir(), "secret", []byte("TOP-SECRET"))
	refusesSwap(t, t.TempDir(), func(p string) error { return os.Symlink(secret, p) }, "a symbolic link, not a regular file")
}

// refusesSwap checks that each opener refuses, with ErrNotRegular and
// want in the error, the regular file "swapped" in dir that put made
// another kind of file between the check of its path and its open.
func refusesSwap(t *testing.T, dir string, put func(path string) error, want string) {
	t.Helper()
	path := writeFile(t, dir, "swapped", []byte("content"))
	beforeOpen = func(p string) {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := put(p); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeOpen = nil })
	for _, o := range openers {
		if o.name == "DescribeLater" {
			continue // it opens nothing
		}
		t.Run(o.name, func(t *testing.T) {
			os.Remove(path)
			writeFile(t, dir, "swapped", []byte("content"))
			err := promptly(t, o.name, func() error { return o.open(path) })
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want it refused as %q (ErrNotRegular)", err, want)
			}
		})
	}
}

// A Source opened on a file keeps reading it, but Verify reports a link
// put under its name since: the file under the path is not the one sent.
func TestSourceVerifyRefusesALinkPutInItsPlace(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "f", []byte("content"))
	info, err := Describe(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSource(path, info)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A link to the very same file is still a link: the name no longer
	// names the file sent.
	other := filepath.Join(dir, "g")
	if err := os.Rename(path, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("Verify = %v, want ErrSourceChanged", err)
	}
}

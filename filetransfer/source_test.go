package filetransfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func TestDescribe(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		size int
	}{
		{"empty.bin", 0},
		{"one.bin", 1},
		{"five-mib.bin", 5 << 20},
		{"odd.bin", copyBufSize + 17}, // crosses the read buffer
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(t, tc.size)
			path := writeFile(t, dir, tc.name, data)
			got, err := Describe(path)
			if err != nil {
				t.Fatal(err)
			}
			want := infoOf(tc.name, data)
			if !got.sameFile(want) {
				t.Fatalf("Describe = %+v, want %+v", got, want)
			}
			fi, _ := os.Stat(path)
			if !got.ModTime.Equal(fi.ModTime()) {
				t.Fatalf("ModTime %v, want %v", got.ModTime, fi.ModTime())
			}
		})
	}
	// The SHA-256 of nothing, as every tool prints it.
	got, _ := Describe(filepath.Join(dir, "empty.bin"))
	if got.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty file checksum %s", got.SHA256)
	}
}

func TestDescribeRefusesWhatIsNotAFile(t *testing.T) {
	if _, err := Describe(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Describe(dir) = %v", err)
	}
	if _, err := Describe(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Describe(missing) = %v", err)
	}
}

func TestInfoAndFileProps(t *testing.T) {
	info := infoOf("a.txt", []byte("abc"))
	var p message.FileProps
	info.SetProps(&p)
	if got := InfoFromProps(p); !got.sameFile(info) || got.Check() != nil {
		t.Fatalf("round trip through FileProps: %+v", got)
	}
}

func TestSourceReadsChunks(t *testing.T) {
	data := randomBytes(t, 300_000)
	path := writeFile(t, t.TempDir(), "f.bin", data)
	info, err := Describe(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenSource(path, info)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got bytes.Buffer
	h := NewHasher()
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := src.ReadChunk(off, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got.Write(buf[:n])
		h.Write(buf[:n])
		off += int64(n)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("chunks differ from the file")
	}
	if err := h.Check(info); err != nil {
		t.Fatal(err)
	}
	if err := src.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ReadChunk(info.Size+1, buf); !errors.Is(err, ErrOffset) {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := src.ReadChunk(-1, buf); !errors.Is(err, ErrOffset) {
		t.Fatalf("read at -1: %v", err)
	}
}

// TestSourceChangedDuringReading changes the file between chunks in each
// way a user can, and checks that the transfer fails with a reason that
// names the change.
func TestSourceChangedDuringReading(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		says   string
	}{
		{"appended", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte("more"))
			f.Close()
		}, "size was 100000 bytes, now 100004"},
		{"rewritten in place", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt([]byte("X"), 5)
			f.Close()
			// Make sure the clock moved, whatever the timestamp granularity.
			later := time.Now().Add(2 * time.Second)
			os.Chtimes(path, later, later)
		}, "modification time was"},
		{"replaced", func(t *testing.T, path string) {
			tmp := path + ".new"
			os.WriteFile(tmp, randomBytes(t, 10), 0o644)
			os.Rename(tmp, path)
		}, "another file was put in its place"},
		{"removed", func(t *testing.T, path string) { os.Remove(path) }, "it was removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "f.bin", randomBytes(t, 100_000))
			info, err := Describe(path)
			if err != nil {
				t.Fatal(err)
			}
			src, err := OpenSource(path, info)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			buf := make([]byte, 10_000)
			if _, err := src.ReadChunk(0, buf); err != nil {
				t.Fatal(err)
			}
			tc.change(t, path)
			err = src.Verify()
			if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Verify = %v, want ErrSourceChanged saying %q", err, tc.says)
			}
		})
	}
}

func TestSourceTruncatedFailsTheRead(t *testing.T) {
	path := writeFile(t, t.TempDir(), "f.bin", randomBytes(t, 100_000))
	info, _ := Describe(path)
	src, err := OpenSource(path, info)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := os.Truncate(path, 50_000); err != nil {
		t.Fatal(err)
	}
	_, err = src.ReadChunk(40_000, make([]byte, 20_000))
	if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "it ends at 50000 bytes") {
		t.Fatalf("ReadChunk over the new end = %v", err)
	}
}

func TestOpenSourceRefusesAStaleInfo(t *testing.T) {
	path := writeFile(t, t.TempDir(), "f.bin", []byte("hello"))
	info, _ := Describe(path)
	os.WriteFile(path, []byte("hello, world"), 0o644)
	if _, err := OpenSource(path, info); !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("OpenSource with a stale Info = %v", err)
	}
}

func TestHasherSeesOtherContent(t *testing.T) {
	info := infoOf("a", []byte("abc"))
	for _, sent := range []string{"ab", "abd", "abcd"} {
		h := NewHasher()
		h.Write([]byte(sent))
		if err := h.Check(info); !errors.Is(err, ErrSourceChanged) {
			t.Fatalf("Check after %q = %v", sent, err)
		}
	}
}

func TestDescribeStopsWithItsContext(t *testing.T) {
	path := writeFile(t, t.TempDir(), "f.bin", randomBytes(t, 3<<20))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DescribeContext(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("DescribeContext with a cancelled context: %v", err)
	}
}

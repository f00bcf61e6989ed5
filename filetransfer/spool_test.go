package filetransfer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestIncomingResumesAfterRestart receives part of a file, "restarts"
// (closes everything and opens the spool again), and checks that the
// transfer resumes at the durable offset, not at what was written after
// the last Sync, carries the checksum on without reading the partial file,
// and delivers the right file.
func TestIncomingResumesAfterRestart(t *testing.T) {
	spoolDir, dest := t.TempDir(), t.TempDir()
	data := randomBytes(t, 5<<20)
	info := infoOf("report.csv", data)
	const chunk = 1 << 20

	s := mustSpool(t, spoolDir)
	in, err := s.Begin("t1", info)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, in, data[:3*chunk], 0, chunk, false)
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := in.Write(3*chunk, data[3*chunk:4*chunk]); err != nil { // never synced
		t.Fatal(err)
	}
	if in.Offset() != 3*chunk || in.Written() != 4*chunk {
		t.Fatalf("Offset %d, Written %d", in.Offset(), in.Written())
	}
	in.Close()

	s = mustSpool(t, spoolDir) // the restart
	pending, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != "t1" || pending[0].Offset != 3*chunk || !pending[0].Info.sameFile(info) {
		t.Fatalf("Pending = %+v", pending)
	}
	in, err = s.Begin("t1", info)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Offset() != 3*chunk || in.Written() != 3*chunk {
		t.Fatalf("resumed at Offset %d, Written %d; want %d", in.Offset(), in.Written(), 3*chunk)
	}
	assertWriteOnly(t, in)
	if err := in.Write(4*chunk, data[4*chunk:]); !errors.Is(err, ErrOffset) {
		t.Fatalf("write at the old, unsynced end: %v", err)
	}
	writeChunks(t, in, data, 3*chunk, chunk, true)
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	if final != filepath.Join(dest, "report.csv") {
		t.Fatalf("delivered to %s", final)
	}
	sameContent(t, final, data)
	if names := dirNames(t, spoolDir); len(names) != 0 {
		t.Fatalf("spool not freed: %v", names)
	}
}

// assertWriteOnly checks, through /proc, that the Incoming's partial file
// is open write-only: it cannot have read the file back to resume.
func assertWriteOnly(t *testing.T, in *Incoming) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", in.f.Fd()))
	if err != nil {
		t.Logf("cannot check the open mode: %v", err)
		return
	}
	var flags int
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%o", &flags)
		}
	}
	if flags&os.O_RDWR != 0 || flags&os.O_WRONLY == 0 {
		t.Fatalf("the partial file is open with flags %o, want write-only", flags)
	}
}

func TestWriteOutOfOrder(t *testing.T) {
	data := randomBytes(t, 1000)
	in, err := mustSpool(t, t.TempDir()).Begin("t", infoOf("f", data))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.Write(0, data[:100]); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 50, 200} {
		err := in.Write(off, data[off:off+100])
		if !errors.Is(err, ErrOffset) || !strings.Contains(err.Error(), fmt.Sprintf("chunk at %d, but the transfer is at 100", off)) {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	if err := in.Write(100, make([]byte, 901)); !errors.Is(err, ErrOverrun) {
		t.Fatalf("write past the size: %v", err)
	}
	if in.Written() != 100 {
		t.Fatalf("refused writes moved the end to %d", in.Written())
	}
}

func TestCorruptFileIsNotDeliveredAndSpoolFreed(t *testing.T) {
	spoolDir, dest := t.TempDir(), t.TempDir()
	data := randomBytes(t, 10_000)
	in, err := mustSpool(t, spoolDir).Begin("t", infoOf("f.bin", data))
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(data)
	bad[5000] ^= 1
	writeChunks(t, in, bad, 0, 4096, true)
	_, err = in.Complete(dest)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Complete = %v, want ErrCorrupt", err)
	}
	if names := dirNames(t, spoolDir); len(names) != 0 {
		t.Fatalf("spool not freed after a corrupt file: %v", names)
	}
	if names := dirNames(t, dest); len(names) != 0 {
		t.Fatalf("a corrupt file was delivered: %v", names)
	}
	if err := in.Write(0, data); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after ErrCorrupt: %v", err)
	}
}

func TestCompleteTooEarlyKeepsTheTransfer(t *testing.T) {
	data := randomBytes(t, 10_000)
	in, err := mustSpool(t, t.TempDir()).Begin("t", infoOf("f.bin", data))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	writeChunks(t, in, data[:6000], 0, 3000, true)
	if _, err := in.Complete(t.TempDir()); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Complete at 6000 of 10000: %v", err)
	}
	writeChunks(t, in, data, 6000, 3000, true)
	final, err := in.Complete(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

func TestPartialNeverVisibleUnderFinalName(t *testing.T) {
	spoolDir, dest := t.TempDir(), t.TempDir()
	data := randomBytes(t, 3<<20)
	in, err := mustSpool(t, spoolDir).Begin("t", infoOf("video.mp4", data))
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < int64(len(data)); off += 1 << 20 {
		writeChunks(t, in, data[:off+1<<20], off, 1<<20, true)
		if names := dirNames(t, dest); len(names) != 0 {
			t.Fatalf("at %d bytes the destination holds %v", off, names)
		}
		for _, n := range dirNames(t, spoolDir) {
			if strings.Contains(n, "video") {
				t.Fatalf("the spool names a file after its final name: %s", n)
			}
		}
	}
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

func TestCollisionsGetNewNames(t *testing.T) {
	dest := t.TempDir()
	writeFile(t, dest, "report.csv", []byte("already here"))
	s := mustSpool(t, t.TempDir())
	for i, want := range []string{"report (1).csv", "report (2).csv"} {
		data := []byte(fmt.Sprintf("version %d", i))
		in, err := s.Begin(fmt.Sprint("t", i), infoOf("report.csv", data))
		if err != nil {
			t.Fatal(err)
		}
		writeChunks(t, in, data, 0, 100, true)
		final, err := in.Complete(dest)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(final) != want {
			t.Fatalf("delivered as %s, want %s", filepath.Base(final), want)
		}
		sameContent(t, final, data)
	}
	sameContent(t, filepath.Join(dest, "report.csv"), []byte("already here"))
}

func TestCandidateNames(t *testing.T) {
	long := strings.Repeat("é", 125) + ".txt" // 254 bytes: the number must cut the base
	for _, tc := range []struct {
		name string
		i    int
		want string
	}{
		{"report.csv", 0, "report.csv"},
		{"report.csv", 1, "report (1).csv"},
		{"report.csv", 12, "report (12).csv"},
		{"archive.tar.gz", 1, "archive.tar (1).gz"},
		{"README", 2, "README (2)"},
		{".profile", 1, ".profile (1)"},
		{long, 1, strings.Repeat("é", 123) + " (1).txt"},
	} {
		got := candidateName(tc.name, tc.i)
		if got != tc.want {
			t.Errorf("candidateName(%q, %d) = %q, want %q", tc.name, tc.i, got, tc.want)
		}
		if len(got) > MaxNameLen || CheckName(got) != nil {
			t.Errorf("candidateName(%q, %d) = %q is not a usable name", tc.name, tc.i, got)
		}
	}
}

// TestConcurrentCompletionsNeverOverwrite completes many transfers of one
// file name into one folder at once: each must land under its own name.
func TestConcurrentCompletionsNeverOverwrite(t *testing.T) {
	const n = 8
	dest := t.TempDir()
	s := mustSpool(t, t.TempDir())
	ins := make([]*Incoming, n)
	datas := make([][]byte, n)
	for i := range ins {
		datas[i] = []byte(fmt.Sprintf("content %d", i))
		in, err := s.Begin(fmt.Sprint("t", i), infoOf("same.txt", datas[i]))
		if err != nil {
			t.Fatal(err)
		}
		writeChunks(t, in, datas[i], 0, 100, true)
		ins[i] = in
	}
	finals := make([]string, n)
	var wg sync.WaitGroup
	for i := range ins {
		wg.Go(func() {
			final, err := ins[i].Complete(dest)
			if err != nil {
				t.Error(err)
			}
			finals[i] = final
		})
	}
	wg.Wait()
	for i, f := range finals {
		sameContent(t, f, datas[i])
	}
	if names := dirNames(t, dest); len(names) != n {
		t.Fatalf("%d files delivered, want %d: %v", len(names), n, names)
	}
}

func TestNamesFromTheNetworkAreChecked(t *testing.T) {
	for _, name := range []string{
		"", ".", "..", "../etc/passwd", "a/b", `a\b`, "/abs", "a\x00b", "line\nbreak",
		strings.Repeat("x", MaxNameLen+1),
	} {
		if err := CheckName(name); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"a", "report (1).csv", "..hidden", "a..b", "日本語.txt", strings.Repeat("x", MaxNameLen)} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a b", "a\x00", "é", strings.Repeat("x", maxIDLen+1)} {
		if err := CheckID(id); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckID(%q) = %v", id, err)
		}
	}
	s := mustSpool(t, t.TempDir())
	good := infoOf("ok.txt", []byte("x"))
	if _, err := s.Begin("../x", good); !errors.Is(err, ErrBadName) {
		t.Errorf("Begin with a bad id: %v", err)
	}
	bad := good
	bad.Filename = "../../x"
	if _, err := s.Begin("t", bad); !errors.Is(err, ErrBadName) {
		t.Errorf("Begin with a bad name: %v", err)
	}
	for _, mutate := range []func(*Info){
		func(i *Info) { i.Size = -1 },
		func(i *Info) { i.SHA256 = strings.ToUpper(i.SHA256) },
		func(i *Info) { i.SHA256 = i.SHA256[:63] },
	} {
		bad := good
		mutate(&bad)
		if _, err := s.Begin("t", bad); !errors.Is(err, ErrBadInfo) {
			t.Errorf("Begin(%+v) = %v", bad, err)
		}
	}
	if names := dirNames(t, s.Dir()); len(names) != 0 {
		t.Fatalf("refused transfers left %v", names)
	}
}

func TestEmptyFileTransfer(t *testing.T) {
	dest := t.TempDir()
	in, err := mustSpool(t, t.TempDir()).Begin("t", infoOf("empty", nil))
	if err != nil {
		t.Fatal(err)
	}
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, nil)
}

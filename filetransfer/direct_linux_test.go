//go:build linux

package filetransfer

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// directFlag reads, through /proc, whether in's partial file is open with
// O_DIRECT now.
func directFlag(t *testing.T, in *Incoming) bool {
	t.Helper()
	rc, err := in.f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		data, rerr = os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	}); err != nil || rerr != nil {
		t.Fatalf("read fdinfo: %v %v", err, rerr)
	}
	var flags int
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%o", &flags)
		}
	}
	return flags&syscall.O_DIRECT != 0
}

// begin begins transfer t1 of data in s.
func begin(t *testing.T, s *Spool, name string, data []byte) *Incoming {
	t.Helper()
	in, err := s.Begin("t1", infoOf(name, data))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// beginDirect is begin, and skips the test where the filesystem of the
// test's temporary folder takes no O_DIRECT.
func beginDirect(t *testing.T, s *Spool, name string, data []byte) *Incoming {
	t.Helper()
	in := begin(t, s, name, data)
	if !in.direct {
		in.Close()
		t.Skip("the filesystem of the test's temporary folder takes no O_DIRECT")
	}
	return in
}

// TestIncomingWritesDirect: a partial file is written with O_DIRECT where
// the filesystem takes it, from aligned chunk buffers and from unaligned
// ones (copied first), again after a resume; the last chunk, whose length
// is not aligned, turns it off; the file delivered holds what was sent.
func TestIncomingWritesDirect(t *testing.T) {
	spoolDir, dest := t.TempDir(), t.TempDir()
	const chunk = 64 << 10
	data := randomBytes(t, 4*chunk+100)
	info := infoOf("direct.bin", data)
	s := mustSpool(t, spoolDir)
	in := beginDirect(t, s, "direct.bin", data)
	if !directFlag(t, in) {
		t.Fatal("direct is set but the file is not open with O_DIRECT")
	}
	al := alignedBuffer(chunk)
	copy(al, data[:chunk])
	if err := in.Write(0, al); err != nil {
		t.Fatal(err)
	}
	// A Data frame's message starts 8 bytes into its buffer.
	un := make([]byte, chunk+8)[8:]
	if aligned(un) {
		t.Fatal("the test's unaligned buffer is aligned")
	}
	copy(un, data[chunk:2*chunk])
	if err := in.Write(chunk, un); err != nil {
		t.Fatal(err)
	}
	if !in.direct || !directFlag(t, in) {
		t.Fatal("an unaligned buffer of an aligned length turned O_DIRECT off")
	}
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	in.Close()

	s = mustSpool(t, spoolDir) // a restart
	in, err := s.Begin("t1", info)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Offset() != 2*chunk || !in.direct || !directFlag(t, in) {
		t.Fatalf("resumed at %d, direct %v: want %d, direct", in.Offset(), in.direct, 2*chunk)
	}
	writeChunks(t, in, data, 2*chunk, chunk, true)
	if in.direct || directFlag(t, in) {
		t.Fatal("the last chunk, of an unaligned length, left O_DIRECT on")
	}
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

// TestFollowTurnsDirectOff: a relay that follows a transfer reads what was
// just written, so the transfer is written through the page cache.
func TestFollowTurnsDirectOff(t *testing.T) {
	s := mustSpool(t, t.TempDir())
	data := randomBytes(t, 8<<10)
	in := beginDirect(t, s, "f.bin", data)
	defer in.Close()
	fo, err := in.Follow()
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	if in.direct || directFlag(t, in) {
		t.Fatal("a followed transfer is still written with O_DIRECT")
	}
	writeChunks(t, in, data, 0, 4<<10, true)
	buf := make([]byte, len(data))
	if n, err := fo.ReadChunk(0, buf); err != nil || n == 0 || string(buf[:n]) != string(data[:n]) {
		t.Fatalf("follower read %d bytes, %v", n, err)
	}
}

// TestDirectStageBounded: an unaligned chunk larger than stageMax turns
// O_DIRECT off rather than grow the staging buffer, and is written.
func TestDirectStageBounded(t *testing.T) {
	s := mustSpool(t, t.TempDir())
	data := randomBytes(t, 2*stageMax)
	in := beginDirect(t, s, "big.bin", data)
	defer in.Close()
	un := make([]byte, 2*stageMax+8)[8:]
	copy(un, data)
	if err := in.Write(0, un); err != nil {
		t.Fatal(err)
	}
	if in.direct || len(in.stage) != 0 {
		t.Fatalf("a %d-byte unaligned chunk: direct %v, a %d-byte staging buffer", len(un), in.direct, len(in.stage))
	}
	if _, err := in.Complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestBufferedWritesOption: a spool opened WithBufferedWrites never
// writes with O_DIRECT, and delivers what it received.
func TestBufferedWritesOption(t *testing.T) {
	s, err := OpenSpool(t.TempDir(), WithBufferedWrites())
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(t, 256<<10)
	in := begin(t, s, "buffered.bin", data)
	defer in.Close()
	if in.direct || directFlag(t, in) {
		t.Fatal("a spool opened WithBufferedWrites writes with O_DIRECT")
	}
	writeChunks(t, in, data, 0, 64<<10, true)
	final, err := in.Complete(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

// residentPages returns how many pages of [off, off+n) of the file at path
// are in the page cache: mincore on a fresh read-only mapping, which
// touches none of them.
func residentPages(t *testing.T, path string, off, n int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), off, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident
}

// TestFollowerDropsWhatItRead: what a Follower has read leaves the page
// cache, and what it has not read yet stays there.
func TestFollowerDropsWhatItRead(t *testing.T) {
	dir := t.TempDir()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == 0x01021994 { // TMPFS_MAGIC: its pages are the file, nothing drops them
		t.Skip("the test's temporary folder is on tmpfs")
	}
	data := randomBytes(t, 1<<20)
	in, fo := beginFollowed(t, mustSpool(t, dir), "c1", data)
	defer in.Close()
	writeChunks(t, in, data, 0, 64<<10, true)
	half := int64(len(data) / 2)
	if got := residentPages(t, in.partPath, 0, int64(len(data))); got == 0 {
		t.Fatal("nothing of the followed file is in the page cache after it was written through it")
	}
	b, err := readFollowed(fo, 0, half)
	if err != nil || !bytes.Equal(b, data[:half]) {
		t.Fatalf("followed %d bytes, %v", len(b), err)
	}
	if got := residentPages(t, in.partPath, 0, half); got != 0 {
		t.Fatalf("%d pages of the half the follower read are still cached", got)
	}
	if got := residentPages(t, in.partPath, half, half); got == 0 {
		t.Fatal("the half the follower has not read left the page cache too")
	}
}

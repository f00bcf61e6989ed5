//go:build linux

package filetransfer

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestSpoolFullThenResume receives a 3 MiB file into a spool on a 1 MiB
// tmpfs. The write or sync that hits the full filesystem must fail with
// ErrSpoolFull, leave the durable offset where it was and the spool
// readable; once the tmpfs grows, the same Incoming goes on from that
// offset, a restart resumes there too, and the file completes with the
// right checksum.
func TestSpoolFullThenResume(t *testing.T) {
	spoolDir := mountTmpfs(t, "1m")
	dest := t.TempDir()
	data := randomBytes(t, 3<<20)
	info := infoOf("big.bin", data)
	const chunk = 64 << 10

	s := mustSpool(t, spoolDir)
	in, err := s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var full error
	for off := int64(0); off < info.Size && full == nil; off += chunk {
		if full = in.Write(off, data[off:off+chunk]); full == nil {
			full = in.Sync() // a sync per chunk: the durable offset is the failed chunk's
		}
	}
	if !errors.Is(full, ErrSpoolFull) {
		t.Fatalf("filling a 1 MiB spool with 3 MiB: %v, want ErrSpoolFull", full)
	}
	at := in.Offset()
	t.Logf("the spool filled at %d bytes: %v", at, full)
	if at == 0 || at >= info.Size || in.Written() != at {
		t.Fatalf("after the failure: Offset %d, Written %d", at, in.Written())
	}
	if fi, err := os.Stat(s.partPath("t")); err != nil || fi.Size() != at {
		t.Fatalf("partial file after the failure: %v, %v; want %d bytes", fi.Size(), err, at)
	}
	if st, err := readState(s.statePath("t")); err != nil || st.Offset != at {
		t.Fatalf("state after the failure: %+v, %v", st, err)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=16m", spoolDir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	if err := in.Write(at, data[at:at+chunk]); err != nil {
		t.Fatalf("write at %d once space returned: %v", at, err)
	}
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	in.Close()

	s = mustSpool(t, spoolDir) // and a restart on top
	in, err = s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Offset() != at+chunk {
		t.Fatalf("resumed at %d, want %d", in.Offset(), at+chunk)
	}
	writeChunks(t, in, data, in.Offset(), chunk, false)
	final, err := in.Complete(dest) // also across filesystems: tmpfs to disk
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
	if names := dirNames(t, spoolDir); len(names) != 0 {
		t.Fatalf("spool not freed: %v", names)
	}
}

// TestSyncFailsWhenTheStateDoesNotFit fills a tmpfs exactly with chunk
// data, so that the write succeeds and the state update of Sync is what
// hits the full filesystem. The transfer must go back to its durable
// offset, and go on from it once there is room.
func TestSyncFailsWhenTheStateDoesNotFit(t *testing.T) {
	spoolDir := mountTmpfs(t, "1m")
	data := randomBytes(t, 2<<20)
	info := infoOf("big.bin", data)
	s := mustSpool(t, spoolDir)
	in, err := s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const first = 64 << 10
	writeChunks(t, in, data[:first], 0, first, true)
	var st syscall.Statfs_t
	if err := syscall.Statfs(spoolDir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if err := in.Write(first, data[first:first+free]); err != nil {
		t.Fatalf("write of the %d free bytes: %v", free, err)
	}
	if err := in.Sync(); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("Sync on a full filesystem: %v, want ErrSpoolFull", err)
	}
	if in.Offset() != first || in.Written() != first {
		t.Fatalf("after the failed Sync: Offset %d, Written %d; want both %d", in.Offset(), in.Written(), first)
	}
	if fi, err := os.Stat(s.partPath("t")); err != nil || fi.Size() != first {
		t.Fatalf("partial file after the failed Sync: %v bytes, %v", fi.Size(), err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=16m", spoolDir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	writeChunks(t, in, data, first, 256<<10, true)
	final, err := in.Complete(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

package filetransfer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pendingInfo is the Info of data announced before its checksum.
func pendingInfo(name string, data []byte) Info {
	i := infoOf(name, data)
	i.SHA256 = ""
	return i
}

func TestCheckAnnouncedPending(t *testing.T) {
	data := []byte("content")
	if err := pendingInfo("a.bin", data).CheckAnnounced(); err != nil {
		t.Fatalf("a pending announcement of content: %v", err)
	}
	if err := pendingInfo("a.bin", data).Check(); !errors.Is(err, ErrBadInfo) {
		t.Fatalf("Check of a pending Info = %v; it must stay strict", err)
	}
	if err := pendingInfo("a.bin", nil).CheckAnnounced(); !errors.Is(err, ErrBadInfo) {
		t.Fatalf("an empty file without its checksum = %v; want ErrBadInfo", err)
	}
	bad := infoOf("a.bin", data)
	bad.SHA256 = "XYZ"
	if err := bad.CheckAnnounced(); !errors.Is(err, ErrBadInfo) {
		t.Fatalf("a malformed checksum = %v; want ErrBadInfo", err)
	}
}

// TestPendingNeverDurableAtSize: while the checksum follows, no Sync makes
// the size durable, neither in memory nor in the state a later Begin
// reads; SetChecksum then Deliver verify, record and place the file.
func TestPendingNeverDurableAtSize(t *testing.T) {
	data := randomBytes(t, 300<<10)
	dir := t.TempDir()
	sp := mustSpool(t, dir)
	in := mustBegin(t, sp, "p1", pendingInfo("p.bin", data))
	writeChunks(t, in, data, 0, 100<<10, true)
	if got := in.Offset(); got != 200<<10 {
		t.Fatalf("durable offset %d after the whole file with its checksum pending; want the last checkpoint below it, %d", got, 200<<10)
	}
	if _, err := in.Deliver(t.TempDir()); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Deliver before the checksum = %v; want ErrIncomplete", err)
	}
	// A restart here resumes below the size.
	in.Close()
	in = mustBegin(t, sp, "p1", pendingInfo("p.bin", data))
	if got := in.Offset(); got != 200<<10 {
		t.Fatalf("resumed at %d; want %d", got, 200<<10)
	}
	writeChunks(t, in, data, in.Offset(), 100<<10, true)
	if err := in.SetChecksum("not hex"); !errors.Is(err, ErrBadInfo) {
		t.Fatalf("SetChecksum of a malformed sum = %v", err)
	}
	if err := in.SetChecksum(infoOf("p.bin", data).SHA256); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	path, err := in.Deliver(dest)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, path, data)
	// Between Deliver and Finish the state says whole and verified: a
	// restart there resumes at the size with the checksum, even when the
	// announcement still leaves it to follow.
	in.Close()
	in = mustBegin(t, sp, "p1", pendingInfo("p.bin", data))
	if in.Offset() != int64(len(data)) || in.Info().SHA256 != infoOf("p.bin", data).SHA256 {
		t.Fatalf("after Deliver, resumed at %d with checksum %q", in.Offset(), in.Info().SHA256)
	}
	in.Finish()
}

// TestPendingWrongChecksumIsCorrupt: a checksum that the bytes do not
// have fails Deliver as corrupt and removes the transfer.
func TestPendingWrongChecksumIsCorrupt(t *testing.T) {
	data := randomBytes(t, 64<<10)
	dir := t.TempDir()
	sp := mustSpool(t, dir)
	in := mustBegin(t, sp, "p2", pendingInfo("p.bin", data))
	writeChunks(t, in, data, 0, 16<<10, false)
	if err := in.SetChecksum(infoOf("p.bin", []byte("other")).SHA256); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if _, err := in.Deliver(dest); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Deliver = %v; want ErrCorrupt", err)
	}
	if names := dirNames(t, dest); len(names) != 0 {
		t.Fatalf("a corrupt file was delivered: %v", names)
	}
	if p, err := sp.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("spool after a corrupt transfer: %+v, %v", p, err)
	}
}

// TestPendingMergesWithKnownChecksum: a transfer begun pending resumes
// when the same file is announced with its checksum, which a trailer must
// then match.
func TestPendingMergesWithKnownChecksum(t *testing.T) {
	data := randomBytes(t, 64<<10)
	sp := mustSpool(t, t.TempDir())
	in := mustBegin(t, sp, "p3", pendingInfo("p.bin", data))
	writeChunks(t, in, data[:32<<10], 0, 16<<10, true)
	in.Close()
	in = mustBegin(t, sp, "p3", infoOf("p.bin", data))
	if in.Offset() != 32<<10 {
		t.Fatalf("announced with its checksum, the pending transfer resumed at %d, not %d", in.Offset(), 32<<10)
	}
	writeChunks(t, in, data, in.Offset(), 16<<10, true)
	if in.Offset() != int64(len(data)) {
		t.Fatalf("with its checksum known, the whole file is durable: offset %d", in.Offset())
	}
	if err := in.SetChecksum(infoOf("p.bin", []byte("other")).SHA256); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a trailer that contradicts the known checksum = %v; want ErrCorrupt", err)
	}
	if p, err := sp.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("spool after a contradicted checksum: %+v, %v", p, err)
	}
}

// TestFollowerChecksumWaitsForVerification: a Follower of a pending
// transfer reads the last bytes and learns the checksum only once the
// receiver verified the file.
func TestFollowerChecksumWaitsForVerification(t *testing.T) {
	data := randomBytes(t, 128<<10)
	sp := mustSpool(t, t.TempDir())
	in := mustBegin(t, sp, "p4", pendingInfo("p.bin", data))
	fo, err := in.Follow()
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	writeChunks(t, in, data, 0, 32<<10, true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if sum, err := fo.Checksum(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Checksum before verification = %q, %v; want it to wait", sum, err)
	}
	got, err := readFollowed(fo, 0, 96<<10)
	if err != nil || len(got) != 96<<10 {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	type res struct {
		b   []byte
		sum string
		err error
	}
	done := make(chan res, 1)
	go func() {
		b, err := readFollowed(fo, 96<<10, int64(len(data)))
		var sum string
		if err == nil {
			sum, err = fo.Checksum(context.Background())
		}
		done <- res{b, sum, err}
	}()
	if err := in.SetChecksum(infoOf("p.bin", data).SHA256); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if _, err := in.Deliver(dest); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.sum != infoOf("p.bin", data).SHA256 || len(r.b) != 32<<10 {
		t.Fatalf("after Deliver the follower read %d bytes, checksum %q, %v", len(r.b), r.sum, r.err)
	}
	in.Finish()
}

// TestFollowerChecksumEndsWithTransfer: a pending transfer that ends short
// (closed, to resume later) ends the wait for its checksum.
func TestFollowerChecksumEndsWithTransfer(t *testing.T) {
	data := randomBytes(t, 64<<10)
	sp := mustSpool(t, t.TempDir())
	in := mustBegin(t, sp, "p5", pendingInfo("p.bin", data))
	fo, err := in.Follow()
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	done := make(chan error, 1)
	go func() {
		_, err := fo.Checksum(context.Background())
		done <- err
	}()
	writeChunks(t, in, data, 0, 16<<10, true)
	in.Close()
	if err := <-done; !errors.Is(err, ErrUnfinished) {
		t.Fatalf("Checksum of a closed pending transfer = %v; want ErrUnfinished", err)
	}
}

func TestDescribeLaterAndMatching(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(t, 10<<10)
	p := writeFile(t, dir, "d.bin", data)
	later, err := DescribeLater(p)
	if err != nil || later.SHA256 != "" || later.Size != int64(len(data)) || later.Filename != "d.bin" {
		t.Fatalf("DescribeLater = %+v, %v", later, err)
	}
	got, err := DescribeMatching(context.Background(), p, later)
	if err != nil || got.SHA256 != infoOf("d.bin", data).SHA256 {
		t.Fatalf("DescribeMatching = %+v, %v", got, err)
	}
	if err := os.WriteFile(p, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := DescribeMatching(context.Background(), p, later); !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("DescribeMatching of a file that shrank = %v; want ErrSourceChanged", err)
	}
	if _, err := DescribeLater(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("DescribeLater of a missing file succeeded")
	}
}

// TestPendingStateAtSizeStartsAgain: a state that records the whole file
// without its checksum (which Sync never writes, but a disk or a hand
// could) is not resumed: the transfer starts again from 0, never at the
// size, which would be acked as custody.
func TestPendingStateAtSizeStartsAgain(t *testing.T) {
	data := randomBytes(t, 32<<10)
	dir := t.TempDir()
	sp := mustSpool(t, dir)
	in := mustBegin(t, sp, "p6", pendingInfo("p.bin", data))
	writeChunks(t, in, data, 0, 8<<10, false)
	in.mu.Lock()
	in.bg.wait()
	hs, err := in.h.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
	if err == nil {
		err = in.f.Sync()
	}
	if err == nil {
		err = writeState(in.statePath, in.info, in.end, hs)
	}
	in.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	in.Close()
	in = mustBegin(t, sp, "p6", pendingInfo("p.bin", data))
	defer in.Close()
	if in.Offset() != 0 {
		t.Fatalf("a pending state at the size resumed at %d; want 0", in.Offset())
	}
}

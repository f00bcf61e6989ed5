package filetransfer

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// readFollowed reads from fo until offset want, in chunks of 64 KiB, and
// returns what it read, or the first error.
func readFollowed(fo *Follower, from, want int64) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for at := from; at < want; {
		n, err := fo.ReadChunk(at, buf)
		if err != nil {
			return out, err
		}
		out = append(out, buf[:n]...)
		at += int64(n)
	}
	return out, nil
}

// beginFollowed begins the transfer id of data in sp and a Follower of
// it, closed at the end of the test.
func beginFollowed(t *testing.T, sp *Spool, id string, data []byte) (*Incoming, *Follower) {
	t.Helper()
	in, err := sp.Begin(id, infoOf("f.bin", data))
	if err != nil {
		t.Fatal(err)
	}
	fo, err := in.Follow()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fo.Close() })
	return in, fo
}

// TestFollowerReadsOnlyDurableBytes: a Follower waits for Sync before it
// returns bytes, reads past delivery and the removal of the spool name,
// and ends at the size.
func TestFollowerReadsOnlyDurableBytes(t *testing.T) {
	data := randomBytes(t, 1<<20)
	sp := mustSpool(t, t.TempDir())
	in, fo := beginFollowed(t, sp, "f1", data)
	half := int64(len(data) / 2)
	if err := in.Write(0, data[:half]); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, err := readFollowed(fo, 0, half)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("the follower read bytes that were written but not synced")
	case <-time.After(50 * time.Millisecond):
	}
	if err := in.Sync(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data[:half]) {
		t.Fatal("the follower read other bytes than the ones written")
	}
	if err := in.Write(half, data[half:]); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	rest, err := readFollowed(fo, half, int64(len(data)))
	if err != nil || !bytes.Equal(rest, data[half:]) {
		t.Fatalf("after delivery the follower read %d bytes (%v), want the %d that were left", len(rest), err, len(data)-int(half))
	}
	if _, err := fo.ReadChunk(int64(len(data)), make([]byte, 8)); !errors.Is(err, io.EOF) {
		t.Fatalf("at the size: %v, want io.EOF", err)
	}
}

// TestFollowerEndsWithTheTransfer: a transfer closed short of the offset
// a Follower waits for ends the wait with ErrUnfinished, and Close ends
// it with ErrClosed.
func TestFollowerEndsWithTheTransfer(t *testing.T) {
	data := randomBytes(t, 256<<10)
	sp := mustSpool(t, t.TempDir())
	in, fo := beginFollowed(t, sp, "f2", data)
	errc := make(chan error, 1)
	go func() {
		_, err := fo.ReadChunk(0, make([]byte, 1024))
		errc <- err
	}()
	if err := in.Write(0, data[:1000]); err != nil {
		t.Fatal(err)
	}
	in.Close() // unsynced: nothing became durable
	if err := <-errc; !errors.Is(err, ErrUnfinished) {
		t.Fatalf("ReadChunk after Close of the transfer: %v, want ErrUnfinished", err)
	}

	in, fo2 := beginFollowed(t, sp, "f2", data)
	defer in.Close()
	go func() {
		_, err := fo2.ReadChunk(0, make([]byte, 1024))
		errc <- err
	}()
	fo2.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadChunk after Close of the follower: %v, want ErrClosed", err)
	}
}

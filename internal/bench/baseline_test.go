package bench

import (
	"context"
	"io"
	"os"
	"testing"
)

// The raw-copy baseline copies exactly the bytes asked for, reports a
// rate, and leaves nothing behind in the bench directory.
func TestMeasureRawCopy(t *testing.T) {
	dir := t.TempDir()
	const n = 3<<20 + 123 // not a multiple of the copy buffer
	b, err := measureRawCopy(context.Background(), dir, n, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b.RawBytes != n || b.RawMiBPerSec <= 0 {
		t.Errorf("got %+v, want %d bytes at a rate above 0", b, n)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the bench directory still holds %v", left)
	}
	if b, err := measureRawCopy(context.Background(), dir, 0, io.Discard); err != nil || b != (rawBaseline{}) {
		t.Errorf("0 bytes: got %+v, %v; want nothing measured", b, err)
	}
}

// A cancelled context stops the raw copy with its error, and removes its
// files.
func TestMeasureRawCopyCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := measureRawCopy(ctx, dir, 1<<20, io.Discard); err == nil {
		t.Error("a cancelled raw copy returned no error")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the bench directory still holds %v", left)
	}
}

package filetransfer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCompleteAfterCrashDuringDelivery simulates a crash between the link
// into the destination and the spool cleanup: the next Complete must find
// the delivered file, not deliver a second copy.
func TestCompleteAfterCrashDuringDelivery(t *testing.T) {
	spoolDir, dest := t.TempDir(), t.TempDir()
	data := randomBytes(t, 50_000)
	info := infoOf("data.bin", data)
	s := mustSpool(t, spoolDir)
	in, err := s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, in, data, 0, 10_000, true)
	// What Complete does up to the crash: link the synced file into place.
	if err := os.Link(in.partPath, filepath.Join(dest, "data.bin")); err != nil {
		t.Fatal(err)
	}
	in.Close()

	s = mustSpool(t, spoolDir)
	in, err = s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	if in.Offset() != info.Size {
		t.Fatalf("resumed at %d, want %d", in.Offset(), info.Size)
	}
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	if final != filepath.Join(dest, "data.bin") {
		t.Fatalf("Complete after the crash delivered %s again", final)
	}
	if names := dirNames(t, dest); len(names) != 1 {
		t.Fatalf("destination holds %v, want one file", names)
	}
	sameContent(t, final, data)
	if names := dirNames(t, spoolDir); len(names) != 0 {
		t.Fatalf("spool not freed: %v", names)
	}
}

// TestCompleteAcrossFilesystems delivers into a folder on another
// filesystem (a tmpfs), where a hard link is impossible: the copy path.
func TestCompleteAcrossFilesystems(t *testing.T) {
	dest := mountTmpfs(t, "16m")
	data := randomBytes(t, 3<<20)
	writeFile(t, dest, "x.bin", []byte("old"))
	in, err := mustSpool(t, t.TempDir()).Begin("t", infoOf("x.bin", data))
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, in, data, 0, 1<<20, true)
	final, err := in.Complete(dest)
	if err != nil {
		t.Fatal(err)
	}
	if final != filepath.Join(dest, "x (1).bin") {
		t.Fatalf("delivered to %s", final)
	}
	sameContent(t, final, data)
	if names := dirNames(t, dest); !slices.Equal(names, []string{"x (1).bin", "x.bin"}) {
		t.Fatalf("destination holds %v (a temp file left?)", names)
	}
}

func TestAbortAndDiscardFreeTheSpool(t *testing.T) {
	dir := t.TempDir()
	s := mustSpool(t, dir)
	data := randomBytes(t, 10_000)
	in, err := s.Begin("a", infoOf("a", data))
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, in, data[:5000], 0, 5000, true)
	if err := in.Abort("refused by the consumer"); err != nil {
		t.Fatal(err)
	}
	if err := in.Abort("twice"); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Abort: %v", err)
	}
	in, err = s.Begin("b", infoOf("b", data))
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, in, data[:5000], 0, 5000, true)
	if err := s.Discard("b"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Discard of an open transfer: %v", err)
	}
	in.Close()
	if err := s.Discard("b"); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("spool not freed: %v", names)
	}
}

func TestBeginTwiceIsBusy(t *testing.T) {
	s := mustSpool(t, t.TempDir())
	info := infoOf("a", []byte("abc"))
	in, err := s.Begin("t", info)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin("t", info); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Begin: %v", err)
	}
	in.Close()
	in, err = s.Begin("t", info)
	if err != nil {
		t.Fatalf("Begin after Close: %v", err)
	}
	in.Close()
}

// TestBeginAnotherFileStartsAgain: a state for another file under the same
// id is not resumed (the bytes would belong to another checksum).
func TestBeginAnotherFileStartsAgain(t *testing.T) {
	dir := t.TempDir()
	s := mustSpool(t, dir)
	old := randomBytes(t, 10_000)
	in, _ := s.Begin("t", infoOf("f", old))
	writeChunks(t, in, old[:8000], 0, 4000, true)
	in.Close()
	data := randomBytes(t, 10_000)
	in, err := s.Begin("t", infoOf("f", data))
	if err != nil {
		t.Fatal(err)
	}
	if in.Offset() != 0 {
		t.Fatalf("resumed another file at %d", in.Offset())
	}
	writeChunks(t, in, data, 0, 4000, true)
	final, err := in.Complete(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, final, data)
}

// TestDamagedStateStartsAgain: states a crash or a hand cannot leave
// readable start the transfer again instead of failing it.
func TestDamagedStateStartsAgain(t *testing.T) {
	data := randomBytes(t, 10_000)
	info := infoOf("f", data)
	for name, damage := range map[string]func(s *Spool){
		"garbage state":      func(s *Spool) { os.WriteFile(s.statePath("t"), []byte("{not json"), 0o644) },
		"partial file gone":  func(s *Spool) { os.Remove(s.partPath("t")) },
		"partial file short": func(s *Spool) { os.Truncate(s.partPath("t"), 10) },
	} {
		t.Run(name, func(t *testing.T) {
			s := mustSpool(t, t.TempDir())
			in, _ := s.Begin("t", info)
			writeChunks(t, in, data[:5000], 0, 5000, true)
			in.Close()
			damage(s)
			in, err := s.Begin("t", info)
			if err != nil {
				t.Fatal(err)
			}
			if in.Offset() != 0 {
				t.Fatalf("resumed a damaged transfer at %d", in.Offset())
			}
			writeChunks(t, in, data, 0, 5000, true)
			if _, err := in.Complete(t.TempDir()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenSpoolRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := mustSpool(t, dir)
	data := randomBytes(t, 1000)
	in, _ := s.Begin("kept", infoOf("f", data))
	writeChunks(t, in, data[:500], 0, 500, true)
	in.Close()
	writeFile(t, dir, "orphan.part", []byte("no state"))
	writeFile(t, dir, "kept.state.tmp", []byte("half a state"))
	writeFile(t, dir, "README", []byte("not ours"))
	mustSpool(t, dir)
	if names := dirNames(t, dir); !slices.Equal(names, []string{"README", "kept.part", "kept.state"}) {
		t.Fatalf("spool after OpenSpool: %v", names)
	}
}

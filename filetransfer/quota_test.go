package filetransfer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestQuotaTotalAndPerPeer(t *testing.T) {
	dir := t.TempDir()
	s := mustSpool(t, dir)
	if err := s.SetQuota(Quota{Max: 100, PerPeer: 60}); err != nil {
		t.Fatal(err)
	}
	d1, d2, d3 := randomBytes(t, 50), randomBytes(t, 20), randomBytes(t, 50)
	in1, err := s.BeginFor("a", "t1", infoOf("one", d1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginFor("a", "t2", infoOf("two", d2)); !errors.Is(err, ErrSpoolQuota) {
		t.Fatalf("a's second file past its 60-byte share: %v, want ErrSpoolQuota", err)
	}
	in3, err := s.BeginFor("b", "t3", infoOf("three", d3))
	if err != nil {
		t.Fatalf("b's file within its share and the total: %v", err)
	}
	if _, err := s.BeginFor("c", "t4", infoOf("two", d2)); !errors.Is(err, ErrSpoolQuota) {
		t.Fatalf("a file past the 100-byte total: %v, want ErrSpoolQuota", err)
	}
	// A transfer closed half-way stays in the spool and keeps its room;
	// its resume is let through.
	writeChunks(t, in1, d1[:25], 0, 25, true)
	in1.Close()
	if st := s.QuotaStats(); st.Used != 100 || st.Paused != 2 {
		t.Fatalf("stats %+v, want 100 used and 2 paused", st)
	}
	in1, err = s.BeginFor("a", "t1", infoOf("one", d1))
	if err != nil || in1.Offset() != 25 {
		t.Fatalf("resume within the quota: %v", err)
	}
	// Leaving the spool gives the room back.
	if err := in1.Abort("test"); err != nil {
		t.Fatal(err)
	}
	in3.Close()
	if err := s.Discard("t3"); err != nil {
		t.Fatal(err)
	}
	if st := s.QuotaStats(); st.Used != 0 {
		t.Fatalf("%d bytes counted once the spool is empty", st.Used)
	}
	in2, err := s.BeginFor("a", "t2", infoOf("two", d2))
	if err != nil {
		t.Fatalf("after room came back: %v", err)
	}
	in2.Close()
	if err := s.CheckQuota("a", 61); !errors.Is(err, ErrOverQuota) {
		t.Fatalf("a file larger than a share: %v, want ErrOverQuota", err)
	}
	if err := s.CheckQuota("a", 60); err != nil {
		t.Fatal(err)
	}
	// A restart counts what the spool holds.
	s2 := mustSpool(t, dir)
	if err := s2.SetQuota(Quota{Max: 100}); err != nil {
		t.Fatal(err)
	}
	if st := s2.QuotaStats(); st.Used != 20 {
		t.Fatalf("after a restart: %d used, want 20", st.Used)
	}
}

// TestQuotaCountsHeldFiles: the files a relay holds count against the
// total.
func TestQuotaCountsHeldFiles(t *testing.T) {
	dir := t.TempDir()
	s := mustSpool(t, dir)
	held := filepath.Join(dir, "held", "x")
	if err := os.MkdirAll(held, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, held, "f", make([]byte, 40))
	if err := s.SetQuota(Quota{Max: 100, Held: filepath.Join(dir, "held")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginFor("a", "t1", infoOf("one", randomBytes(t, 70))); !errors.Is(err, ErrSpoolQuota) {
		t.Fatalf("70 bytes beside 40 held, quota 100: %v, want ErrSpoolQuota", err)
	}
	in, err := s.BeginFor("a", "t2", infoOf("two", randomBytes(t, 60)))
	if err != nil {
		t.Fatalf("60 bytes beside 40 held, quota 100: %v", err)
	}
	in.Close()
	if st := s.QuotaStats(); st.Held != 40 || st.Used != 60 {
		t.Fatalf("stats %+v, want 40 held and 60 used", st)
	}
}

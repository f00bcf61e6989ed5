package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// trailerFixture is a receiver taking files into one receive queue and
// folder, over real TCP, and a sender side that speaks the file protocol
// by hand: what a buggy or hostile sender could send, packet by packet.
type trailerFixture struct {
	srv      *Server
	q        *queue.Queue
	received string
	spool    string
	content  []byte
	sum      string
}

func newTrailerFixture(t *testing.T) *trailerFixture {
	t.Helper()
	dir := t.TempDir()
	f := &trailerFixture{received: filepath.Join(dir, "received"), spool: filepath.Join(dir, "spool")}
	// Syncs every 64 KiB: the file's last checkpoint below its size is
	// then known.
	f.srv, f.q = startFileServer(t, dir, 64<<10)
	// 256 KiB: the last chunk completes a FileSyncBytes, so it is where a
	// checkpoint would record the whole size were the checksum not pending.
	f.content = bytes.Repeat([]byte("checksum follow "), 16384)
	s := sha256.Sum256(f.content)
	f.sum = hex.EncodeToString(s[:])
	return f
}

// announcement is the file message of the fixture's content, with the
// checksum given (empty: it follows).
func (f *trailerFixture) announcement(t *testing.T, sum string, size int) []byte {
	t.Helper()
	m := &message.Message{ID: 9, Origin: message.NodeID{1}, Destination: "files@b", Kind: message.KindFile, Priority: 4}
	m.File.Filename, m.File.Filesize, m.File.FileChecksum = "data.bin", int64(size), sum
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// open opens a file session on a connection of its own and announces ann.
// cut closes that connection, as a broken link would.
func (f *trailerFixture) open(t *testing.T, ann []byte) (s *session.Session, cut func()) {
	t.Helper()
	s, c := openFileSession(t, f.srv, ann)
	return s, func() { c.Close() }
}

// sendFrom sends the content from offset at in chunks of 32 KiB, reading
// the flow-control acks, none of which may be the size.
func (f *trailerFixture) sendFrom(t *testing.T, s *session.Session, at int) {
	t.Helper()
	ctx := context.Background()
	for at < len(f.content) {
		end := min(at+32<<10, len(f.content))
		if err := s.SendData(ctx, uint64(end), f.content[at:end]); err != nil {
			t.Fatal(err)
		}
		at = end
	}
}

// waitAck returns the next answer, which must come within a few seconds.
func waitAck(t *testing.T, s *session.Session) session.Ack { return nextAck(t, s) }

// finalAnswer reads answers until one is the size or a refusal; every
// flow-control ack before it must be below the size.
func (f *trailerFixture) finalAnswer(t *testing.T, s *session.Session) session.Ack {
	t.Helper()
	for {
		a := waitAck(t, s)
		if a.Refused || a.Seq >= uint64(len(f.content)) {
			return a
		}
	}
}

func (f *trailerFixture) delivered(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(f.received)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestChecksumFollowsIsVerifiedAndStored: a file announced without its
// checksum is taken once the trailer comes, and the message committed
// carries the checksum.
func TestChecksumFollowsIsVerifiedAndStored(t *testing.T) {
	f := newTrailerFixture(t)
	s, _ := f.open(t, f.announcement(t, "", len(f.content)))
	if a := waitAck(t, s); a.Refused || a.Seq != 0 {
		t.Fatalf("announcement answered %+v", a)
	}
	f.sendFrom(t, s, 0)
	if err := s.SendData(context.Background(), session.FileChecksumSeq, []byte(f.sum)); err != nil {
		t.Fatal(err)
	}
	if a := f.finalAnswer(t, s); a.Refused || a.Seq != uint64(len(f.content)) {
		t.Fatalf("final answer %+v; want the size acked", a)
	}
	d, err := f.q.Poll()
	if err != nil || d == nil {
		t.Fatalf("no file message committed: %v", err)
	}
	m, err := d.Message()
	if err != nil {
		t.Fatal(err)
	}
	if m.File.FileChecksum != f.sum {
		t.Fatalf("committed checksum %q, want %q", m.File.FileChecksum, f.sum)
	}
	got, err := os.ReadFile(m.File.ReceivedFilePath)
	if err != nil || !bytes.Equal(got, f.content) {
		t.Fatalf("delivered content differs (%d bytes, %v)", len(got), err)
	}
	d.Ack()
}

// TestChecksumFollowsCutBeforeTrailerResumesBelowSize: a session cut after
// the last byte and before the checksum is answered, on resume, with an
// offset below the size (never the size, which would pass custody of a
// file nobody verified); the rest and the checksum then complete it.
func TestChecksumFollowsCutBeforeTrailerResumesBelowSize(t *testing.T) {
	f := newTrailerFixture(t)
	ann := f.announcement(t, "", len(f.content))
	s, cut := f.open(t, ann)
	if a := waitAck(t, s); a.Seq != 0 {
		t.Fatalf("announcement answered %+v", a)
	}
	f.sendFrom(t, s, 0)
	// The receiver shows every byte arrived, and none made durable past
	// the last checkpoint below the size.
	petreltest.Eventually(t, "every byte at the receiver", func() bool {
		ts := f.srv.Transfers()
		return len(ts) == 1 && ts[0].Received == int64(len(f.content))
	}, func() string { return fmt.Sprintf("transfers %+v", f.srv.Transfers()) })
	if ts := f.srv.Transfers(); ts[0].Offset >= int64(len(f.content)) {
		t.Fatalf("durable offset %d with the checksum pending", ts[0].Offset)
	}
	cut()
	// The old session may still hold the transfer for a moment: the new
	// one takes it over.
	again, _ := f.open(t, ann)
	a := waitAck(t, again)
	if a.Refused {
		t.Fatalf("resume refused: %+v", a)
	}
	at := a.Seq
	if at >= uint64(len(f.content)) {
		t.Fatalf("resume answered %d for a %d-byte file whose checksum never came: custody would pass unverified", at, len(f.content))
	}
	if at == 0 {
		t.Fatalf("resume at 0: nothing was durable, the test checks nothing")
	}
	if len(f.delivered(t)) != 0 {
		t.Fatal("a file was delivered before its checksum came")
	}
	f.sendFrom(t, again, int(at))
	if err := again.SendData(context.Background(), session.FileChecksumSeq, []byte(f.sum)); err != nil {
		t.Fatal(err)
	}
	if a := f.finalAnswer(t, again); a.Refused || a.Seq != uint64(len(f.content)) {
		t.Fatalf("final answer %+v; want the size acked", a)
	}
	if names := f.delivered(t); len(names) != 1 {
		t.Fatalf("delivered %v", names)
	}
}

// TestChecksumFollowsWrongTrailerIsCorrupt: a checksum the bytes do not
// have is refused at the size, as corrupt, and nothing is delivered or
// kept.
func TestChecksumFollowsWrongTrailerIsCorrupt(t *testing.T) {
	f := newTrailerFixture(t)
	s, _ := f.open(t, f.announcement(t, "", len(f.content)))
	if a := waitAck(t, s); a.Seq != 0 {
		t.Fatalf("announcement answered %+v", a)
	}
	f.sendFrom(t, s, 0)
	wrong := strings.Repeat("0", 64)
	if err := s.SendData(context.Background(), session.FileChecksumSeq, []byte(wrong)); err != nil {
		t.Fatal(err)
	}
	a := f.finalAnswer(t, s)
	if !a.Refused || a.Seq != uint64(len(f.content)) || !strings.Contains(a.Reason, "SHA-256") {
		t.Fatalf("answer to a wrong checksum %+v; want a refusal of the size as corrupt", a)
	}
	if names := f.delivered(t); len(names) != 0 {
		t.Fatalf("a corrupt file was delivered: %v", names)
	}
	if n := f.q.Stats().Depth; n != 0 {
		t.Fatalf("%d file messages committed for a corrupt file", n)
	}
	if st := f.srv.StatsRef().FilesCorrupt.Load(); st != 1 {
		t.Fatalf("FilesCorrupt = %d", st)
	}
}

// TestChecksumFollowsMalformedTrailer: a trailer that is not 64 lowercase
// hex digits, or another packet where the trailer must be, ends the
// session as a protocol error; nothing is delivered.
func TestChecksumFollowsMalformedTrailer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seq     uint64
		payload []byte
	}{
		{"uppercase", session.FileChecksumSeq, []byte(strings.Repeat("A", 64))},
		{"short", session.FileChecksumSeq, []byte(strings.Repeat("a", 63))},
		{"a chunk past the size", 1 << 40, []byte("x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTrailerFixture(t)
			s, _ := f.open(t, f.announcement(t, "", len(f.content)))
			if a := waitAck(t, s); a.Seq != 0 {
				t.Fatalf("announcement answered %+v", a)
			}
			f.sendFrom(t, s, 0)
			if err := s.SendData(context.Background(), tc.seq, tc.payload); err != nil {
				t.Fatal(err)
			}
			for a := range s.Acks() {
				if a.Refused || a.Seq >= uint64(len(f.content)) {
					t.Fatalf("answered %+v to a bad trailer", a)
				}
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("session ended with %v; want the protocol error about the checksum", err)
			}
			if n := f.srv.StatsRef().ProtocolErrors.Load(); n != 1 {
				t.Fatalf("ProtocolErrors = %d", n)
			}
			if names := f.delivered(t); len(names) != 0 {
				t.Fatalf("delivered %v", names)
			}
		})
	}
}

// TestChecksumFollowsRefusedForEmptyFile: an empty file must carry its
// checksum; announced without, it is refused with the reason.
func TestChecksumFollowsRefusedForEmptyFile(t *testing.T) {
	f := newTrailerFixture(t)
	s, _ := f.open(t, f.announcement(t, "", 0))
	a := waitAck(t, s)
	if !a.Refused || a.Seq != 0 || !strings.Contains(a.Reason, "without its checksum") {
		t.Fatalf("empty file without its checksum answered %+v", a)
	}
}

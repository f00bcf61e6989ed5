package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// fileRouter takes every file into one queue and folder.
type fileRouter struct {
	localRouter
	dir string
}

func (r fileRouter) InboundFile(context.Context, session.Peer, *message.Message) (FileTarget, error) {
	return FileTarget{Queue: r.q, Dir: r.dir}, nil
}

func (r fileRouter) FileTaken(*message.Message, FileTarget) {}

// A sender whose link was cut opens a new file session while this side
// still holds the old one, over a connection it has not seen die. The new
// session takes the transfer over and resumes it, instead of failing with
// "transfer already open" until the idle timeout ends the old one.
func TestNewerFileSessionTakesOverAHeldTransfer(t *testing.T) {
	ctx := context.Background()
	srv, q := startFileServer(t, t.TempDir(), 0)

	content := bytes.Repeat([]byte("petrel "), 40000) // 280,000 bytes
	sum := sha256.Sum256(content)
	m := &message.Message{ID: 7, Origin: message.NodeID{1}, Destination: "files@b", Kind: message.KindFile, Priority: 4}
	m.File.Filename, m.File.Filesize, m.File.FileChecksum = "report.bin", int64(len(content)), hex.EncodeToString(sum[:])
	announcement, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	open := func() *session.Session {
		s, _ := openFileSession(t, srv, announcement)
		return s
	}

	// The first session sends part of the file, then goes silent: its
	// connection stays open, as a half-open one would.
	first := open()
	if a := nextAck(t, first); a.Seq != 0 || a.Refused {
		t.Fatalf("first announcement answered %+v, want resume at 0", a)
	}
	const part = 100000
	if err := first.SendData(ctx, part, content[:part]); err != nil {
		t.Fatal(err)
	}
	if a := nextAck(t, first); a.Seq != part {
		t.Fatalf("first session's chunk acked at %d, want %d", a.Seq, part)
	}

	// The second session is answered with a resume offset, not an error.
	second := open()
	a := nextAck(t, second)
	if a.Refused || a.Seq > part {
		t.Fatalf("second announcement answered %+v, want a resume at or below %d", a, part)
	}
	if err := second.SendData(ctx, uint64(len(content)), content[a.Seq:]); err != nil {
		t.Fatal(err)
	}
	for {
		a := nextAck(t, second)
		if a.Refused {
			t.Fatalf("the resumed file was refused: %+v", a)
		}
		if a.Seq == uint64(len(content)) {
			break
		}
	}
	if n := q.Stats().Depth; n != 1 {
		t.Fatalf("receive queue depth %d after the file was taken, want 1", n)
	}
	select {
	case <-first.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the superseded session did not end")
	}
}

// startFileServer starts, over real TCP, a receiver "b" that takes files
// into the receive queue "files" of a store in dir, its spool in
// dir/spool and its folder in dir/received; syncBytes is its
// FileSyncBytes (0: the default). Both stop when the test ends.
func startFileServer(t *testing.T, dir string, syncBytes int64) (*Server, *queue.Queue) {
	t.Helper()
	ctx := context.Background()
	st, err := queue.Open(ctx, queue.Config{Path: filepath.Join(dir, "petrel.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.Queue(ctx, "files", queue.KindReceive)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := filetransfer.OpenSpool(filepath.Join(dir, "spool"), filetransfer.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Listen: "127.0.0.1:0", Window: 16, Logger: quiet, Spool: sp, FileSyncBytes: syncBytes,
		Session: session.Config{Name: "b", ID: message.NodeID{2}, HandshakeTimeout: 5 * time.Second, IdleTimeout: time.Minute, Logger: quiet}},
		st, fileRouter{localRouter{q}, filepath.Join(dir, "received")})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		st.Close()
	})
	return srv, q
}

// openFileSession opens a file session to srv as node "a", on a
// connection of its own (closed when the test ends), and announces ann.
func openFileSession(t *testing.T, srv *Server, ann []byte) (*session.Session, *session.Conn) {
	t.Helper()
	ctx := context.Background()
	c := connectAsA(t, srv)
	s, err := c.OpenFile(ctx, "files@b", 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendData(ctx, 0, ann); err != nil {
		t.Fatal(err)
	}
	return s, c
}

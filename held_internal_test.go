package petrel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func nodeID(t *testing.T) message.NodeID {
	t.Helper()
	id, err := message.NewNodeID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A relayed file is read only from the held copy the node derives for
// its (origin, id); the node's own files are read where their producer
// named them.
func TestHostileFileSourceIsOnlyTheHeldCopy(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	n := &Node{cfg: Config{Name: "c"}, files: FilesConfig{Spool: spool}, id: nodeID(t), log: quietLog}
	foreign := nodeID(t)
	held := filepath.Join(spool, "held", receiver.TransferID(foreign, 9))
	otherHeld := filepath.Join(spool, "held", receiver.TransferID(foreign, 10))
	// The held copies exist: fileSource refuses a copy that is gone.
	for _, p := range []string{held + "/report.csv", held + "/report (1).csv", otherHeld + "/report.csv"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		origin message.NodeID
		path   string
		ok     bool
	}{
		{"own file anywhere", n.id, "/home/user/report.csv", true},
		{"held copy", foreign, held + "/report.csv", true},
		{"held copy under a free variant", foreign, held + "/report (1).csv", true},
		{"a file on the node's disk", foreign, "/etc/passwd", false},
		{"out of the held folder", foreign, held + "/../../../victim/x", false},
		{"another transfer's copy", foreign, otherHeld + "/report.csv", false},
		{"the held folder itself", foreign, held, false},
		{"deeper than the held folder", foreign, held + "/sub/report.csv", false},
		{"no path", foreign, "", false},
	}
	for _, tt := range tests {
		m := &message.Message{ID: 9, Origin: tt.origin, Kind: message.KindFile, File: message.FileProps{SendFilePath: tt.path}}
		got, err := n.fileSource(m)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrForeignPath) {
			t.Errorf("%s: fileSource(%q) = %q, %v; want allowed %v", tt.name, tt.path, got, err, tt.ok)
		}
		if err == nil && got != tt.path {
			t.Errorf("%s: fileSource(%q) = %q", tt.name, tt.path, got)
		}
	}
	if got := n.access.pathsRefused.Load(); got != 6 {
		t.Errorf("paths refused %d, want 6", got)
	}
}

// The cleanup of a relayed file removes the folder derived from (origin,
// id), inside the held root, whatever the message's sendFilePath says.
func TestHostileCleanupRefusesPathsOutsideHeldRoot(t *testing.T) {
	base := t.TempDir()
	spool := filepath.Join(base, "data", "spool")
	victim := filepath.Join(base, "victim")
	for _, d := range []string{victim, filepath.Join(spool, "held")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := &Node{cfg: Config{Name: "c"}, files: FilesConfig{Spool: spool}, id: nodeID(t), log: quietLog}
	foreign := nodeID(t)
	dir, err := n.heldDir(foreign, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &message.Message{ID: 3, Origin: foreign, Kind: message.KindFile,
		File: message.FileProps{SendFilePath: filepath.Join(spool, "held") + "/../../../victim/x"}}
	n.dropHeld(m)
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the folder the message named is gone: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the held copy of (origin, id) is still there: %v", err)
	}
}

// Defence in depth: a file message from another origin that reaches a
// send queue with a path that is not its held copy fails for good, with
// the reason, and its path is never read.
func TestHostileForeignFileInSendQueueIsDeadLettered(t *testing.T) {
	ctx := context.Background()
	open := func(name, listen string, mod func(*Config)) *Node {
		cfg := Config{Name: name, DataDir: t.TempDir(), Logger: quietLog, Listen: listen,
			Link: LinkConfig{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}}
		if mod != nil {
			mod(&cfg)
		}
		n, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	b := open("b", "127.0.0.1:0", nil)
	c := open("c", "", func(cfg *Config) { cfg.Nodes = []NodeConfig{{Name: "b", Connector: "tcp://" + b.ListenAddr()}} })
	secret := filepath.Join(t.TempDir(), "secret.bin")
	content := []byte("the relay's secret")
	if err := os.WriteFile(secret, content, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	q, err := c.sendQueue(ctx, "files", "b")
	if err != nil {
		t.Fatal(err)
	}
	m := &message.Message{ID: 77, Origin: nodeID(t), Destination: "files@b", Kind: message.KindFile, Timestamp: time.Now(),
		Priority: message.DefaultPriority, File: message.FileProps{Filename: "secret.bin", Filesize: int64(len(content)),
			FileChecksum: hex.EncodeToString(sum[:]), SendFilePath: secret}}
	data, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.store.Submit([]queue.Put{{Queue: q, Msg: m, Data: data, Dedupe: true}})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	var dead []StoredMessage
	deadline := time.Now().Add(20 * time.Second)
	for len(dead) == 0 && time.Now().Before(deadline) {
		dead, _ = c.DeadLetters(ctx, "files@b", 0)
		time.Sleep(20 * time.Millisecond)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "held copy") {
		t.Fatalf("dead letters %+v, want the file message with the reason", dead)
	}
	if got := c.AccessStats().PathsRefused; got != 1 {
		t.Errorf("paths refused %d, want 1", got)
	}
	if st, _ := b.QueueStat("files"); st.Depth != 0 {
		t.Errorf("b received %d messages", st.Depth)
	}
	if got, err := os.ReadFile(secret); err != nil || string(got) != string(content) {
		t.Fatalf("the named file: %q, %v", got, err)
	}
}

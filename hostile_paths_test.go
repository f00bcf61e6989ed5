package petrel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// The hostile-peer suite, paths and access: a peer that holds the shared
// secret speaks the session protocol directly and sends what no honest
// node would. Each attempt must be refused with a reason, and leave the
// node's files, folders and queues as they were.

// hostilePeer is a peer built from the session package alone (see
// rawPeer): it proves the name it claims with no secret, and speaks for
// the id it made.
type hostilePeer struct {
	conn *session.Conn
	id   message.NodeID
}

func dialRaw(t *testing.T, n *petrel.Node, name string) *hostilePeer {
	t.Helper()
	id, err := message.NewNodeID()
	if err != nil {
		t.Fatal(err)
	}
	return &hostilePeer{conn: mustRawPeer(t, n, name, "", id), id: id}
}

// fileMessage is a file message of this peer announcing content, with
// whatever sendFilePath the peer likes.
func (p *hostilePeer) fileMessage(id uint64, dest string, content []byte, sendFilePath string) *message.Message {
	sum := sha256.Sum256(content)
	return &message.Message{
		ID: id, Origin: p.id, Destination: dest, Kind: message.KindFile, Priority: message.DefaultPriority,
		Timestamp: time.Now(),
		File: message.FileProps{
			SrcIdentifier: "a", DestIdentifier: "b", Filename: "payload.bin", Filesize: int64(len(content)),
			FileChecksum: hex.EncodeToString(sum[:]), SendFilePath: sendFilePath, ReceivedFilePath: sendFilePath,
		},
	}
}

func encode(t *testing.T, m *message.Message) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nextAck waits for the node's next answer on sess.
func nextAck(t *testing.T, sess *session.Session) session.Ack {
	t.Helper()
	select {
	case a, ok := <-sess.Acks():
		if !ok {
			t.Fatalf("session ended without an answer: %v", sess.Err())
		}
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("no answer from the node")
	}
	return session.Ack{}
}

func closeSession(sess *session.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sess.Close(ctx, "done")
}

// sendPlain sends m as the first Data packet of an ordinary session to
// addr (a link's, or a client's publish session) and returns the answer.
func (p *hostilePeer) sendPlain(t *testing.T, addr string, publish bool, m *message.Message) session.Ack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sess *session.Session
	var err error
	if publish {
		sess, err = p.conn.OpenPublish(ctx, 16)
	} else {
		sess, err = p.conn.Open(ctx, addr, 16)
	}
	if err != nil {
		t.Fatalf("open session %s: %v", addr, err)
	}
	defer closeSession(sess)
	if err := sess.SendData(ctx, 1, encode(t, m)); err != nil {
		t.Fatal(err)
	}
	return nextAck(t, sess)
}

// sendFile runs a file session to addr: m announces content, which
// follows in one chunk. It returns the node's last answer: the whole size
// once it took custody, or a refusal.
func (p *hostilePeer) sendFile(t *testing.T, addr string, m *message.Message, content []byte) session.Ack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := p.conn.OpenFile(ctx, addr, 16)
	if err != nil {
		t.Fatalf("open file session %s: %v", addr, err)
	}
	defer closeSession(sess)
	if err := sess.SendData(ctx, 0, encode(t, m)); err != nil {
		t.Fatal(err)
	}
	size := uint64(len(content))
	a := nextAck(t, sess)
	if a.Refused || a.Seq == size {
		return a
	}
	if err := sess.SendData(ctx, size, content[a.Seq:]); err != nil {
		t.Fatal(err)
	}
	for a = nextAck(t, sess); !a.Refused && a.Seq < size; a = nextAck(t, sess) {
	}
	return a
}

// tree is what a folder holds: every file and folder under it, with each
// regular file's size and SHA-256. The store's own files are left out
// (their pages move with any read); queue depths stand for them.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case strings.HasPrefix(d.Name(), "petrel.db"):
			out[rel] = "store"
		case d.IsDir():
			out[rel] = "dir"
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %d %x", len(b), sum[:8])
		default:
			out[rel] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s changed:\nbefore %v\nafter  %v", what, before, after)
	}
}

// depth is the depth of n's queue name, 0 if it does not exist.
func refusedFor(t *testing.T, a session.Ack, want string) {
	t.Helper()
	if !a.Refused || !strings.Contains(a.Reason, want) {
		t.Fatalf("answer %+v, want a refusal saying %q", a, want)
	}
}

// A file message sent as ordinary Data, naming a file on the relay's own
// disk, is refused for good: the relay stores nothing, reads nothing and
// forwards nothing. The same (origin, id) then sent honestly, on a file
// session, still goes through, with the peer's content, whatever path
// the peer names: the refusal left no dedupe entry, and the relay holds
// the file at a path of its own.
func TestHostileFileAsPlainDataReadsNoLocalFile(t *testing.T) {
	_, c, b := relayTrio(t, nil)
	secretDir := t.TempDir()
	secret, _ := writeRandom(t, secretDir, "secret.bin", 64<<10)
	secretBytes, _ := os.ReadFile(secret)
	beforeC, beforeSecret := tree(t, c.DataDir()), tree(t, secretDir)

	p := dialRaw(t, c, "a")
	m := p.fileMessage(1, "files@b", secretBytes, secret)
	refusedFor(t, p.sendPlain(t, "files@b", false, m), "file messages travel only on file sessions")

	if st := c.ReceiverStats(); st.FilesOutsideSession != 1 || st.Refused != 1 || st.Stored != 0 {
		t.Errorf("relay receiver stats %+v, want 1 file refused outside a file session, nothing stored", st)
	}
	if d := depth(c, "files@b"); d != 0 {
		t.Errorf("the relay queued %d messages toward b", d)
	}
	sameTree(t, "the relay's data directory", beforeC, tree(t, c.DataDir()))
	sameTree(t, "the folder of the relay's secret file", beforeSecret, tree(t, secretDir))
	if ents, _ := os.ReadDir(filepath.Join(b.DataDir(), "received")); len(ents) != 0 {
		t.Fatalf("b received %d folders", len(ents))
	}

	// The same (origin, id) on a file session: the peer's own bytes go
	// through; its sendFilePath is ignored at every hop.
	own := []byte("the peer's own bytes, not the relay's secret")
	m = p.fileMessage(1, "files@b", own, secret)
	if a := p.sendFile(t, "files@b", m, own); a.Refused || a.Seq != uint64(len(own)) {
		t.Fatalf("honest file session: %+v", a)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	got, err := os.ReadFile(d.File.ReceivedFilePath)
	if err != nil || string(got) != string(own) {
		t.Fatalf("b received %q (%v), want the peer's bytes", got, err)
	}
	if d.File.SendFilePath != "" || !strings.HasPrefix(d.File.ReceivedFilePath, filepath.Join(b.DataDir(), "received")) {
		t.Fatalf("b's file message names paths it did not set: %+v", d.File)
	}
	if _, ok := d.Properties.Get("petrel.handed-by"); !ok {
		t.Error("b did not record who handed the file over")
	}
	waitFor(t, 10*time.Second, func() bool {
		held, _ := os.ReadDir(filepath.Join(c.DataDir(), "spool", "held"))
		return len(held) == 0
	}, func() string { return "the relay still holds the file" })
	sameTree(t, "the folder of the relay's secret file", beforeSecret, tree(t, secretDir))
}

// A sendFilePath that climbs out of the held folder names a directory
// outside the data directory. Sent as plain Data it is refused; announced
// on a file session it is ignored, and the relay's cleanup, once the file
// moved on, removes only its own held copy: the directory survives.
func TestHostileHeldPathTraversalDeletesNothing(t *testing.T) {
	_, c, b := relayTrio(t, nil)
	victim := t.TempDir()
	writeRandom(t, victim, "x", 1000)
	if err := os.Mkdir(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(c.DataDir(), "spool", "held")
	up, err := filepath.Rel(held, victim) // ../../../<victim>, or more
	if err != nil || !strings.HasPrefix(up, "../../../") {
		t.Fatalf("the victim %s is not outside the data directory %s: %q, %v", victim, c.DataDir(), up, err)
	}
	traversal := held + "/" + up + "/x" // uncleaned: what the old cleanup took for a held path
	beforeVictim := tree(t, victim)
	beforeC := tree(t, c.DataDir())

	p := dialRaw(t, c, "a")
	content := []byte("a small file")
	refusedFor(t, p.sendPlain(t, "files@b", false, p.fileMessage(7, "files@b", content, traversal)),
		"file messages travel only on file sessions")
	sameTree(t, "the relay's data directory", beforeC, tree(t, c.DataDir()))

	if a := p.sendFile(t, "files@b", p.fileMessage(8, "files@b", content, traversal), content); a.Refused {
		t.Fatalf("file session: %+v", a)
	}
	d := receiveFile(t, b, "files", 30*time.Second)
	if got, _ := os.ReadFile(d.File.ReceivedFilePath); string(got) != string(content) {
		t.Fatalf("b received %q", got)
	}
	waitFor(t, 10*time.Second, func() bool {
		ents, _ := os.ReadDir(held)
		return len(ents) == 0
	}, func() string { return "the relay still holds the file" })
	sameTree(t, "the directory outside the data directory", beforeVictim, tree(t, victim))
	if st := c.AccessStats(); st.PathsRefused != 0 {
		t.Errorf("paths refused %d: the relay's own held path was taken for a foreign one", st.PathsRefused)
	}
}

// A client may not hand the node a file message on its publish session
// either: the client's paths are on its own machine.
func TestHostileClientPublishesFileMessage(t *testing.T) {
	n := openNode(t, "plant-7", "127.0.0.1:0", nil)
	victim, _ := writeRandom(t, t.TempDir(), "x", 1000)
	content, _ := os.ReadFile(victim)
	before := tree(t, n.DataDir())
	p := dialRaw(t, n, "app-1")
	refusedFor(t, p.sendPlain(t, "", true, p.fileMessage(1, "files", content, victim)), "file messages travel only on file sessions")
	if d := depth(n, "files"); d != 0 {
		t.Fatalf("%d messages stored", d)
	}
	sameTree(t, "the node's data directory", before, tree(t, n.DataDir()))
	if st := n.ReceiverStats(); st.FilesOutsideSession != 1 {
		t.Errorf("files outside session %d, want 1", st.FilesOutsideSession)
	}
}

// A client allowed to send to orders may not have orders@other relayed:
// that takes a relay rule.
func TestHostileClientRelaysOnlyWithRelayRule(t *testing.T) {
	other := openNode(t, "other", "127.0.0.1:0", nil)
	n := openNode(t, "plant-7", "127.0.0.1:0", func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "other", Connector: tcp(other)}}
		c.Access = []petrel.AccessRule{
			{Identity: "app-1", Send: []string{"orders"}},
			{Identity: "app-2", Relay: []string{"orders"}},
		}
	})
	ctx := context.Background()
	p1 := dial(t, n, petrel.DialOptions{Name: "app-1"}).Producer()
	m := p1.CreateDataMessage("orders@other")
	m.Body = []byte("from app-1")
	err := p1.Send(ctx, m)
	if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `may not relay "orders@other"`) {
		t.Fatalf("app-1 send to orders@other: %v, want ErrDenied saying it may not relay", err)
	}
	if _, ok := n.QueueStat("orders@other"); ok {
		t.Fatal("a denied publish made a send queue")
	}
	if err := p1.Send(ctx, p1.CreateDataMessage("orders")); err != nil {
		t.Fatalf("app-1 send to its local orders: %v", err)
	}
	p2 := dial(t, n, petrel.DialOptions{Name: "app-2"}).Producer()
	m = p2.CreateDataMessage("orders@other")
	m.Body = []byte("from app-2")
	if err := p2.Send(ctx, m); err != nil {
		t.Fatalf("app-2, which may relay orders: %v", err)
	}
	if err := p2.Send(ctx, p2.CreateDataMessage("orders")); !errors.Is(err, petrel.ErrDenied) {
		t.Fatalf("app-2 send to the local orders: %v, want ErrDenied (relay is not send)", err)
	}
	_, bodies := drainBodies(t, other, "orders", []string{"from app-2"}, n)
	if bodies["from app-2"] != 1 {
		t.Fatalf("other received %v", bodies)
	}
}

// A file's petrel.notify names an address the peer that handed the file
// over may not send to: the notice is not sent, and counted. One it may
// send to goes out.
func TestHostileNoticeToForbiddenAddressIsNotSent(t *testing.T) {
	b := openNode(t, "b", "127.0.0.1:0", func(c *petrel.Config) {
		c.Access = []petrel.AccessRule{{Identity: "a", Send: []string{"files"}}}
	})
	p := dialRaw(t, b, "a")
	content := []byte("a file with a notice")
	m := p.fileMessage(1, "files", content, "")
	m.Properties.Set(petrel.PropNotify, message.String("secret"))
	if a := p.sendFile(t, "files", m, content); a.Refused {
		t.Fatalf("file refused: %+v", a)
	}
	receiveFile(t, b, "files", 10*time.Second)
	waitFor(t, 10*time.Second, func() bool { return b.AccessStats().NoticesDenied == 1 },
		func() string { return fmt.Sprintf("access stats %+v", b.AccessStats()) })
	if _, ok := b.QueueStat("secret"); ok {
		t.Fatal("the notice to a forbidden address made its queue")
	}
	// A notice to an address the peer may send to is sent.
	m = p.fileMessage(2, "files", content, "")
	m.Properties.Set(petrel.PropNotify, message.String("files"))
	if a := p.sendFile(t, "files", m, content); a.Refused {
		t.Fatalf("file refused: %+v", a)
	}
	receiveFile(t, b, "files", 10*time.Second)
	n := receiveFile(t, b, "files", 10*time.Second)
	if n.Data.DataType != petrel.FileNoticeType {
		t.Fatalf("got %+v, want the notice", n)
	}
	if st := b.AccessStats(); st.NoticesDenied != 1 {
		t.Errorf("notices denied %d, want 1", st.NoticesDenied)
	}
}

// "orders.*" and "*" do not reach a dead-letter address; only a pattern
// naming it does.
func TestHostileWildcardDoesNotReachDeadLettersOrExpiry(t *testing.T) {
	n := openNode(t, "plant-7", "127.0.0.1:0", func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{
			{Name: "payments", Role: address.RoleReceive, Queue: queue.Policy{DeadLetter: "payments-failed"}},
			{Name: "orders", Role: address.RoleReceive, Queue: queue.Policy{ExpiryAddress: "orders.expired"}},
			{Name: "refunds", Role: address.RoleReceive, Queue: queue.Policy{ExpiryAddress: "late-refunds"}},
		}
		c.Access = []petrel.AccessRule{
			{Identity: "app", Send: []string{"*"}, Consume: []string{"orders.*", "payments*", "late-*"}},
			{Identity: "ops", Consume: []string{"orders.dlq", "payments-failed", "orders.expired", "late-refunds"}},
		}
	})
	tests := []struct {
		who    string
		action petrel.Action
		addr   string
		ok     bool
	}{
		{"app", petrel.ActionConsume, "orders.eu", true},
		{"app", petrel.ActionConsume, "orders.dlq", false},
		{"app", petrel.ActionConsume, "orders.eu.dlq", false},
		{"app", petrel.ActionSend, "orders.dlq", false},
		{"app", petrel.ActionSend, "orders", true},
		{"app", petrel.ActionConsume, "payments", true},
		{"app", petrel.ActionConsume, "payments-failed", false}, // its configured dead_letter
		{"ops", petrel.ActionConsume, "orders.dlq", true},
		{"ops", petrel.ActionConsume, "payments-failed", true},
		{"ops", petrel.ActionConsume, "orders.eu.dlq", false},
		// Expiry addresses, likewise.
		{"app", petrel.ActionConsume, "orders.expired", false},
		{"app", petrel.ActionSend, "orders.expired@plant-7", false},
		{"app", petrel.ActionConsume, "late-refunds", false},
		{"app", petrel.ActionConsume, "late-orders", true}, // no address expires into it
		{"ops", petrel.ActionConsume, "orders.expired", true},
		{"ops", petrel.ActionConsume, "late-refunds", true},
		{"ops", petrel.ActionSend, "orders.expired", false},
	}
	for _, tt := range tests {
		err := n.Authorize(tt.who, tt.action, tt.addr)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, petrel.ErrDenied) {
			t.Errorf("Authorize(%q, %s, %q) = %v, want allowed %v", tt.who, tt.action, tt.addr, err, tt.ok)
		}
	}
	if err := n.Authorize("app", petrel.ActionConsume, "orders.dlq"); err == nil || !strings.Contains(err.Error(), "dead-letter") {
		t.Errorf("the denial does not say why: %v", err)
	}
	if err := n.Authorize("app", petrel.ActionConsume, "orders.expired"); err == nil || !strings.Contains(err.Error(), `"orders.expired" is an expiry address`) {
		t.Errorf("the denial does not say why: %v", err)
	}
	app := dial(t, n, petrel.DialOptions{Name: "app"})
	if _, err := app.Consumer("orders.dlq"); !errors.Is(err, petrel.ErrDenied) {
		t.Fatalf("app consumes orders.dlq: %v, want ErrDenied", err)
	}
	consumer(t, app, "orders.eu")
	consumer(t, dial(t, n, petrel.DialOptions{Name: "ops"}), "orders.dlq")
}

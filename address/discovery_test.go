package address

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/petrelmq/petrel/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	selfID  = message.NodeID{0x5e, 15: 0x1f}
	plantID = message.NodeID{0x07, 15: 0x07}
	quiet   = slog.New(slog.DiscardHandler)
)

// fakeNet is a broadcast network in memory: what one conn writes, every
// open conn reads, as on a LAN. Its channels belong to the synctest bubble
// that makes them, so a reader waiting on one is durably blocked.
type fakeNet struct {
	mu    sync.Mutex
	conns []*fakeConn
	port  int
}

type fakePacket struct {
	b    []byte
	from net.Addr
}

type fakeConn struct {
	net    *fakeNet
	addr   *net.UDPAddr
	in     chan fakePacket
	closed chan struct{}
	once   sync.Once
	fail   error // WriteTo's error, when set
}

func (n *fakeNet) conn() *fakeConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.port++
	c := &fakeConn{
		net: n, addr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + n.port},
		in: make(chan fakePacket, 64), closed: make(chan struct{}),
	}
	n.conns = append(n.conns, c)
	return c
}

func (c *fakeConn) WriteTo(p []byte, _ net.Addr) (int, error) {
	if c.fail != nil {
		return 0, c.fail
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	for _, to := range c.net.conns {
		select {
		case to.in <- fakePacket{append([]byte(nil), p...), c.addr}:
		default: // a full socket buffer drops, as UDP does
		}
	}
	return len(p), nil
}

func (c *fakeConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case pk := <-c.in:
		return copy(p, pk.b), pk.from, nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *fakeConn) LocalAddr() net.Addr { return c.addr }

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// testConfig is a discovery configuration with the defaults' period and
// timeout, spelt out for the arithmetic of the tests.
func testConfig() DiscoveryConfig {
	return DiscoveryConfig{Group: "127.255.255.255:7401", Period: 2 * time.Second, Timeout: 10 * time.Second, Logger: quiet}
}

func startListener(t *testing.T, n *fakeNet, cfg DiscoveryConfig, dir *Directory) *Listener {
	t.Helper()
	l, err := NewListener(cfg, selfID, dir)
	if err != nil {
		t.Fatal(err)
	}
	l.start(n.conn())
	t.Cleanup(l.Stop)
	return l
}

func startAnnouncer(t *testing.T, n *fakeNet, cfg DiscoveryConfig, a Announcement) *Announcer {
	t.Helper()
	an, err := NewAnnouncer(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	an.start(n.conn())
	t.Cleanup(an.Stop)
	return an
}

// TestDiscoveryLifecycle: a node is discovered at its first announcement,
// each announcement refreshes LastSeen, and once it stops it leaves the
// directory after the timeout, within Period/2.
func TestDiscoveryLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n, dir := &fakeNet{}, NewDirectory()
		startListener(t, n, testConfig(), dir)
		changed := dir.Changed()
		an := startAnnouncer(t, n, testConfig(), AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		synctest.Wait()

		e, ok := dir.Lookup("plant-7")
		want := Entry{Name: "plant-7", ID: plantID, Connectors: mustConnectors(t, "tcp://10.0.0.7:7400"), Source: SourceDiscovered, LastSeen: start}
		if !ok || entryString(e) != entryString(want) {
			t.Fatalf("Lookup = %v, %v; want %v", e, ok, want)
		}
		select {
		case <-changed:
		default:
			t.Fatal("Changed not closed by a new node")
		}

		changed = dir.Changed()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if e, _ := dir.Lookup("plant-7"); !e.LastSeen.Equal(start.Add(2 * time.Second)) {
			t.Fatalf("after a second announcement LastSeen = %v, want %v", e.LastSeen, start.Add(2*time.Second))
		}
		select {
		case <-changed:
			t.Fatal("a refresh closed Changed")
		default:
		}

		an.Stop() // last heard at 2s: the expiry that runs every second removes it at 12s
		time.Sleep(9500 * time.Millisecond)
		synctest.Wait()
		if _, ok := dir.Lookup("plant-7"); !ok {
			t.Fatal("expired before the timeout")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if e, ok := dir.Lookup("plant-7"); ok {
			t.Fatalf("still there %v after it was last heard: %v", time.Since(e.LastSeen), e)
		}
		select {
		case <-changed:
		default:
			t.Fatal("Changed not closed by an expiry")
		}
	})
}

// entryString is for test messages and comparisons.
func entryString(e Entry) string {
	return e.Name + "/" + e.ID.String() + "/" + e.Connectors.String() + "/" + e.Source.String() + "/" + e.LastSeen.Format(time.RFC3339Nano)
}

// TestDiscoveryStaticWins: a node in the configuration keeps its static
// connectors while it also announces itself, and keeps them after its
// announcements stop.
func TestDiscoveryStaticWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		static := mustConnectors(t, "tcp://plant-7.example:7400")
		dir.SetStatic([]Entry{{Name: "plant-7", Connectors: static}})
		startListener(t, n, testConfig(), dir)
		an := startAnnouncer(t, n, testConfig(), AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		synctest.Wait()

		if e, _ := dir.Lookup("plant-7"); e.Source != SourceStatic || e.Connectors.String() != static.String() {
			t.Fatalf("Lookup = %v, want the static entry", e)
		}
		if got := dir.Entries(); len(got) != 1 || got[0].Source != SourceStatic {
			t.Fatalf("Entries = %v, want the static entry only", got)
		}
		all := dir.All()
		if len(all) != 2 || all[0].Source != SourceStatic || all[1].Source != SourceDiscovered || all[1].ID != plantID {
			t.Fatalf("All = %v, want the static entry, then the discovered one", all)
		}
		an.Stop()
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if all := dir.All(); len(all) != 1 || all[0].Source != SourceStatic {
			t.Fatalf("after expiry All = %v, want the static entry only", all)
		}
	})
}

// TestListenerDrops sends a listener every kind of bad packet: each is
// counted, none changes the directory.
func TestListenerDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		cfg := testConfig()
		cfg.Secret = testSecret
		l := startListener(t, n, cfg, dir)
		changed := dir.Changed()

		sign := func(a Announcement, secret []byte) []byte {
			b, err := a.AppendBinary(nil, secret)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		plant := AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400"))
		self := AnnouncementFor("me", selfID, mustConnectors(t, "tcp://10.0.0.1:7400"))
		quic := Announcement{Name: "q", ID: plantID, Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "c1", Factory: "quic"}}}}
		good := sign(plant, testSecret)
		long := append(append([]byte(nil), good...), make([]byte, MaxAnnouncementSize)...)
		out := n.conn()
		for _, p := range [][]byte{
			[]byte("hello"),              // foreign
			good[:20],                    // truncated
			append(good[:4:4], 2),        // another version
			long,                         // too long for one announcement
			sign(plant, nil),             // unsigned
			sign(plant, []byte("other")), // another secret
			sign(self, testSecret),       // our own
			sign(quic, testSecret),       // nothing this node can dial
		} {
			if _, err := out.WriteTo(p, nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		want := ListenerStats{Received: 8, Malformed: 4, BadMAC: 2, Own: 1, Unusable: 1}
		if got := l.Stats(); got != want {
			t.Fatalf("Stats = %+v, want %+v", got, want)
		}
		select {
		case <-changed:
			t.Fatalf("a dropped packet changed the directory: %v", dir.All())
		default:
		}

		out.WriteTo(good, nil)
		synctest.Wait()
		want.Received, want.Accepted = 9, 1
		if got := l.Stats(); got != want {
			t.Fatalf("Stats = %+v, want %+v", got, want)
		}
		if _, ok := dir.Lookup("plant-7"); !ok {
			t.Fatal("a good packet after bad ones was not heard")
		}
	})
}

// TestListenerFull: a listener whose directory holds MaxNodes drops the
// announcements of new nodes and counts them; the known node refreshes.
func TestListenerFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		cfg := testConfig()
		cfg.MaxNodes = 1
		l := startListener(t, n, cfg, dir)
		out := n.conn()
		cs := mustConnectors(t, "tcp://10.0.0.7:7400")
		for i := byte(1); i <= 3; i++ {
			b, err := AnnouncementFor("plant", message.NodeID{0x70, i}, cs).AppendBinary(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := out.WriteTo(b, nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if st := l.Stats(); st.Full != 2 || st.Accepted != 3 || dir.Discovered() != 1 {
			t.Fatalf("Stats = %+v with %d held, want 2 dropped of 3 and 1 held", st, dir.Discovered())
		}
		if e, _ := dir.Lookup("plant"); e.ID != (message.NodeID{0x70, 1}) {
			t.Fatalf("held %v, want the first node", e.ID)
		}
	})
}

// TestAnnouncerUpdate: new connectors go out at once, not at the next
// period.
func TestAnnouncerUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		startListener(t, n, testConfig(), dir)
		an := startAnnouncer(t, n, testConfig(), AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		synctest.Wait()
		changed := dir.Changed()
		if err := an.Update(AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.8:7400"))); err != nil {
			t.Fatal(err)
		}
		<-changed // no time passes: the bubble would deadlock if it waited for the ticker
		if e, _ := dir.Lookup("plant-7"); e.Connectors.String() != "tcp://10.0.0.8:7400" {
			t.Fatalf("after Update Lookup = %v", e)
		}
		if err := an.Update(Announcement{Name: "-bad", ID: plantID}); !errors.Is(err, ErrAnnouncement) {
			t.Fatalf("Update with a bad announcement: %v", err)
		}
		// The listener may see the packet before the announcer counts it
		// sent: wait for the bubble to settle.
		synctest.Wait()
		if got := an.Stats(); got != (AnnouncerStats{Sent: 2}) {
			t.Fatalf("Stats = %+v, want 2 sent", got)
		}
	})
}

// TestAnnouncerSendFails: the announcer keeps trying every period and
// counts the failures.
func TestAnnouncerSendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		an, err := NewAnnouncer(testConfig(), AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		if err != nil {
			t.Fatal(err)
		}
		c := (&fakeNet{}).conn()
		c.fail = errors.New("network is unreachable")
		an.start(c)
		defer an.Stop()
		time.Sleep(5 * time.Second) // sends at 0, 2s and 4s
		synctest.Wait()
		if got := an.Stats(); got != (AnnouncerStats{Failed: 3}) {
			t.Fatalf("Stats = %+v, want 3 failed", got)
		}
	})
}

func TestDiscoveryConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  DiscoveryConfig
		want string // "" for valid
	}{
		{"defaults", DiscoveryConfig{}, ""},
		{"loopback broadcast", DiscoveryConfig{Group: "127.255.255.255:7401"}, ""},
		{"multicast", DiscoveryConfig{Group: "239.255.74.1:7401", Period: time.Second, Timeout: 3 * time.Second}, ""},
		{"4in6", DiscoveryConfig{Group: "[::ffff:127.255.255.255]:7401"}, ""},
		{"no port", DiscoveryConfig{Group: "255.255.255.255"}, "want an IPv4 address and a port"},
		{"host name", DiscoveryConfig{Group: "lan:7401"}, "want an IPv4 address"},
		{"ipv6", DiscoveryConfig{Group: "[ff02::1]:7401"}, "want an IPv4 address"},
		{"unspecified", DiscoveryConfig{Group: "0.0.0.0:7401"}, "not a destination"},
		{"negative period", DiscoveryConfig{Period: -time.Second}, "shorter than 1ms"},
		{"timeout not longer", DiscoveryConfig{Period: 10 * time.Second}, "not longer than the period"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrDiscoveryConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := NewAnnouncer(DiscoveryConfig{Group: "127.255.255.255:0"}, Announcement{}); !errors.Is(err, ErrDiscoveryConfig) {
		t.Errorf("announcer to port 0: err = %v", err)
	}
	if _, err := NewAnnouncer(DiscoveryConfig{}, Announcement{Name: "n"}); !errors.Is(err, ErrAnnouncement) {
		t.Errorf("announcer of a bad announcement: err = %v", err)
	}
}

// TestDiscoveryReplayAfterRestart: a node's signed announcement is
// recorded; the node restarts on another port (a new announcer, a new
// run); the recorded announcement replayed many times a second does not
// point the directory back at the old port, and is counted stale. Once the
// node stops, the replay does not keep its entry alive past the timeout.
func TestDiscoveryReplayAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		cfg := testConfig()
		cfg.Secret = testSecret
		l := startListener(t, n, cfg, dir)
		tap := n.conn() // an attacker's socket: it reads and writes the group

		an, err := NewAnnouncer(cfg, AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		if err != nil {
			t.Fatal(err)
		}
		an.start(n.conn())
		synctest.Wait()
		recorded := (<-tap.in).b
		time.Sleep(3 * time.Second)
		an.Stop()

		startAnnouncer(t, n, cfg, AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7401")))
		synctest.Wait()
		if e, _ := dir.Lookup("plant-7"); e.Connectors.String() != "tcp://10.0.0.7:7401" {
			t.Fatalf("after the restart Lookup = %v", entryString(e))
		}
		for range 300 { // 30s at 10 a second
			tap.WriteTo(recorded, nil)
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if e, _ := dir.Lookup("plant-7"); e.Connectors.String() != "tcp://10.0.0.7:7401" {
				t.Fatalf("a replay moved the entry back: %v", entryString(e))
			}
		}
		if st := l.Stats(); st.Stale < 300 {
			t.Fatalf("Stats = %+v, want the 300 replays stale", st)
		}
		for len(tap.in) > 0 {
			<-tap.in
		}
	})
}

// TestDiscoveryReplayStopped: with the node stopped, a replay of its last
// announcement does not refresh its entry, which expires on time; what the
// replay does after that is what it did before sequences: keep a stopped
// node in the directory.
func TestDiscoveryReplayStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, dir := &fakeNet{}, NewDirectory()
		cfg := testConfig()
		cfg.Secret = testSecret
		startListener(t, n, cfg, dir)
		tap := n.conn()
		an, err := NewAnnouncer(cfg, AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400")))
		if err != nil {
			t.Fatal(err)
		}
		an.start(n.conn())
		synctest.Wait()
		last := (<-tap.in).b
		an.Stop() // heard at start: expires 10s later
		start := time.Now()
		retaken := false
		for range 150 {
			tap.WriteTo(last, nil)
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			<-tap.in
			e, ok := dir.Lookup("plant-7")
			switch {
			case time.Since(start) < 10*time.Second && (!ok || !e.LastSeen.Equal(start)):
				t.Fatalf("at %v: %v, %v; want the entry as last heard at the start", time.Since(start), entryString(e), ok)
			case ok && e.LastSeen.After(start):
				retaken = true
			}
		}
		if !retaken {
			t.Fatal("the replay was not taken again once the entry had expired")
		}
	})
}

// TestAnnouncerSeq: every packet an announcer sends has a greater sequence
// than the one before, also two sent at the same instant, and a new
// announcer of the node starts above the last one.
func TestAnnouncerSeq(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &fakeNet{}
		tap := n.conn()
		a := AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://10.0.0.7:7400"))
		var last uint64
		next := func() {
			t.Helper()
			synctest.Wait()
			for len(tap.in) > 0 {
				got, err := DecodeAnnouncement((<-tap.in).b, testSecret)
				if err != nil {
					t.Fatal(err)
				}
				if got.Seq <= last {
					t.Fatalf("sequence %d after %d", got.Seq, last)
				}
				last = got.Seq
			}
		}
		cfg := testConfig()
		cfg.Secret = testSecret
		for range 2 {
			an, err := NewAnnouncer(cfg, a)
			if err != nil {
				t.Fatal(err)
			}
			an.start(n.conn())
			t.Cleanup(an.Stop)
			next()
			an.Update(a) // at the same instant
			next()
			time.Sleep(2 * time.Second)
			next()
			an.Stop()
			// A restart takes time; were it to take none, the new run's
			// first sequence would equal the old run's last.
			time.Sleep(time.Millisecond)
		}
		if last == 0 {
			t.Fatal("nothing sent")
		}
	})
}

package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOpenAcceptRefuse(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	ctx := context.Background()
	go func() {
		for {
			sess, err := s.Accept(ctx)
			if err != nil {
				return
			}
			if sess.Address() == "orders" {
				_ = sess.Accept(100)
			} else {
				_ = sess.Refuse("no receive address " + sess.Address() + " on hub-1")
			}
		}
	}()
	snd, err := c.Open(ctx, "orders", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if snd.Window() != 100 || snd.Address() != "orders" || snd.Peer().Name != "hub-1" || snd.ID() == 0 {
		t.Fatalf("session window %d address %q peer %+v id %d", snd.Window(), snd.Address(), snd.Peer(), snd.ID())
	}
	_, err = c.Open(ctx, "nope", 10)
	var remote *RemoteError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &remote) || remote.Reason != "no receive address nope on hub-1" {
		t.Fatalf("Open of a refused address: %v", err)
	}
	if st := c.Stats(); st.Sessions != 1 {
		t.Fatalf("client holds %d sessions after a refusal, want 1", st.Sessions)
	}
	// The connection is still good after a refusal.
	if _, err := c.Open(ctx, "orders", 5); err != nil {
		t.Fatal(err)
	}
}

func TestWindowNegotiation(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	for _, tc := range []struct{ client, server, want uint32 }{{10, 100, 10}, {100, 10, 10}, {7, 7, 7}, {1 << 30, 1 << 31, MaxWindow}} {
		snd, rcv := openPair(t, c, s, "q", tc.client, tc.server)
		if snd.Window() != tc.want || rcv.Window() != tc.want {
			t.Errorf("windows %d/%d: sender %d receiver %d, want %d", tc.client, tc.server, snd.Window(), rcv.Window(), tc.want)
		}
	}
}

func TestWrongSideCalls(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	ctx := context.Background()
	snd, rcv := openPair(t, c, s, "q", 10, 10)
	if _, err := s.Open(ctx, "q", 1); !errors.Is(err, ErrProtocol) {
		t.Errorf("server Open: %v", err)
	}
	if _, err := c.Accept(ctx); !errors.Is(err, ErrProtocol) {
		t.Errorf("client Accept: %v", err)
	}
	if _, err := c.Open(ctx, "q", 0); err == nil {
		t.Error("Open with window 0 succeeded")
	}
	if err := rcv.SendData(ctx, 1, nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("receiver SendData: %v", err)
	}
	if _, err := snd.Recv(ctx); !errors.Is(err, ErrProtocol) {
		t.Errorf("sender Recv: %v", err)
	}
	if err := snd.Ack(1); !errors.Is(err, ErrProtocol) {
		t.Errorf("sender Ack: %v", err)
	}
	if err := rcv.Accept(5); !errors.Is(err, ErrProtocol) {
		t.Errorf("second Accept: %v", err)
	}
	if err := snd.SendData(ctx, 1, make([]byte, DefaultMaxFrame)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("SendData over MaxFrame: %v", err)
	}
}

func TestManySessionsShareConn(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	const sessions, msgs = 20, 200
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range sessions {
		snd, rcv := openPair(t, c, s, fmt.Sprintf("q%d", i), 16, 16)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := send(ctx, snd, 1, msgs, 16); err != nil {
				t.Errorf("session %d: %v", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			for seq := uint64(1); seq <= msgs; seq++ {
				d, err := rcv.Recv(ctx)
				if err != nil || d.Seq != seq || string(d.Message) != fmt.Sprintf("%s-%d", rcv.Address(), seq) {
					t.Errorf("session %d: got %d %q %v, want seq %d", i, d.Seq, d.Message, err, seq)
					return
				}
				if err := rcv.Ack(seq); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.Sessions != sessions || st.FramesOut < sessions*msgs {
		t.Fatalf("client stats %+v", st)
	}
}

// send sends seqs first..last on snd, each message "address-seq", keeping
// at most window unacknowledged, and waits until the last is acked.
func send(ctx context.Context, snd *Session, first, last uint64, window uint64) error {
	acked := first - 1
	acks := snd.Acks()
	wait := func() error {
		a, ok := <-acks
		if !ok {
			return fmt.Errorf("acks closed: %w", snd.Err())
		}
		if a.Refused {
			return fmt.Errorf("seq %d refused: %s", a.Seq, a.Reason)
		}
		acked = a.Seq
		return nil
	}
	for seq := first; seq <= last; seq++ {
		for seq-acked > window {
			if err := wait(); err != nil {
				return err
			}
		}
		if err := snd.SendData(ctx, seq, fmt.Appendf(nil, "%s-%d", snd.Address(), seq)); err != nil {
			return err
		}
	}
	for acked < last {
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

// TestDataFlow sends 100k packets with a window and cumulative acks every
// 100 packets, over real TCP.
func TestDataFlow(t *testing.T) {
	c, s := tcpPair(t, testConfig("plant-7"), testConfig("hub-1"))
	const n, window = 100_000, 1000
	snd, rcv := openPair(t, c, s, "orders", window, window)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		for seq := uint64(1); seq <= n; seq++ {
			d, err := rcv.Recv(ctx)
			if err != nil {
				errc <- err
				return
			}
			if d.Seq != seq || string(d.Message) != fmt.Sprintf("orders-%d", seq) {
				errc <- fmt.Errorf("got seq %d %q, want %d", d.Seq, d.Message, seq)
				return
			}
			if seq%100 == 0 {
				if err := rcv.Ack(seq); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- nil
	}()
	if err := send(ctx, snd, 1, n, window); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Each side counts a batch once its Write returned, which may be just
	// after the peer read it: let the counters settle.
	var cs, ss ConnStats
	for range 1000 {
		cs, ss = c.Stats(), s.Stats()
		if ss.FramesIn == cs.FramesOut && ss.BytesIn == cs.BytesOut && cs.FramesIn == ss.FramesOut && cs.BytesIn == ss.BytesOut {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if cs.FramesOut < n || ss.FramesIn != cs.FramesOut || ss.BytesIn != cs.BytesOut || cs.FramesIn != ss.FramesOut {
		t.Fatalf("stats disagree: client %+v server %+v", cs, ss)
	}
}

// TestRecvPassesSequenceThrough: the session neither reorders nor dedupes:
// replays and gaps arrive as sent.
func TestRecvPassesSequenceThrough(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	seqs := []uint64{1, 2, 3, 2, 3, 7, 5, 1, 0, 1 << 63}
	for _, seq := range seqs {
		if err := snd.SendData(ctx, seq, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	for range seqs {
		d, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint64(d.Message) != d.Seq {
			t.Fatalf("seq %d carries message %x", d.Seq, d.Message)
		}
		got = append(got, d.Seq)
	}
	if !reflect.DeepEqual(got, seqs) {
		t.Fatalf("received %v, sent %v", got, seqs)
	}
}

func TestSendDataCopiesMessage(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	buf := []byte("first")
	if err := snd.SendData(ctx, 1, buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	if err := snd.SendData(ctx, 2, buf); err != nil {
		t.Fatal(err)
	}
	d1, _ := rcv.Recv(ctx)
	d2, _ := rcv.Recv(ctx)
	if string(d1.Message) != "first" || string(d2.Message) != "XXXXX" {
		t.Fatalf("got %q %q", d1.Message, d2.Message)
	}
	d2.Message[0] = 'y' // the caller owns it; it must not alias anything
	if string(d1.Message) != "first" {
		t.Fatal("messages share memory")
	}
}

func TestRefuseSeqAndAcks(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	for seq := uint64(1); seq <= 3; seq++ {
		if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := rcv.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcv.RefuseSeq(2, "destination nowhere@x is unknown"); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Ack(3); err != nil {
		t.Fatal(err)
	}
	want := []Ack{{Seq: 2, Refused: true, Reason: "destination nowhere@x is unknown"}, {Seq: 3}}
	for _, w := range want {
		if a := <-snd.Acks(); a != w {
			t.Fatalf("ack %+v, want %+v", a, w)
		}
	}
}

// TestConnDeathEndsSessions: when the connection dies everything blocked
// on it returns, and every session ends.
func TestDataForUnknownSession(t *testing.T) {
	cn, sn := net.Pipe()
	s, err := startServer(t, sn, testConfig("hub-1"), func() { rawClient(t, cn, "plant-7") })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer cn.Close()
	go func() { _, _ = cn.Write(frame(TypeData, 0, 77, Data{Seq: 1, Message: []byte("x")})) }()
	h, p, err := ReadFrame(cn, 1<<20, nil)
	if err != nil || h.Type != TypeError || h.Session != 77 {
		t.Fatalf("got %+v %v, want a session-level Error", h, err)
	}
	e, _ := DecodeErrorPacket(p)
	if !strings.Contains(e.Reason, "session 77") {
		t.Fatalf("reason %q", e.Reason)
	}
	if s.Err() != nil {
		t.Fatalf("connection died: %v", s.Err())
	}
	// Still usable: a session opens.
	go func() {
		_, _ = cn.Write(frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Name: "plant-7", Address: "q", Window: 4}))
	}()
	sess, err := s.Accept(context.Background())
	if err != nil || sess.Address() != "q" || sess.Peer().Name != "plant-7" {
		t.Fatalf("Accept: %v %v", sess, err)
	}
}

func TestMaxSessions(t *testing.T) {
	scfg := testConfig("hub-1")
	scfg.MaxSessions = 3
	c, s := pair(t, testConfig("plant-7"), scfg)
	for i := range 3 {
		openPair(t, c, s, fmt.Sprint(i), 1, 1)
	}
	_, err := c.Open(context.Background(), "one more", 1)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "3 sessions already open") {
		t.Fatalf("Open past MaxSessions: %v", err)
	}
}

func TestLargeDataFrame(t *testing.T) {
	ccfg, scfg := testConfig("plant-7"), testConfig("hub-1")
	ccfg.MaxFrame, scfg.MaxFrame = 8<<20, 8<<20
	c, s := tcpPair(t, ccfg, scfg)
	snd, rcv := openPair(t, c, s, "files", 4, 4)
	big := bytes.Repeat([]byte("0123456789abcdef"), (8<<20-8)/16)
	ctx := context.Background()
	for seq := uint64(1); seq <= 3; seq++ {
		if err := snd.SendData(ctx, seq, big); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		d, err := rcv.Recv(ctx)
		if err != nil || !bytes.Equal(d.Message, big) {
			t.Fatalf("large frame: %d bytes, %v", len(d.Message), err)
		}
	}
}

// TestTakeAcks: TakeAcks returns every ack that arrived, in order, in one
// batch; once the session ended and nothing is left it says so. A session
// read with TakeAcks keeps the same bound as one read with Acks.
func TestTakeAcks(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 2, 2)
	ctx := context.Background()
	for seq := uint64(1); seq <= 2; seq++ {
		if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
			t.Fatal(err)
		}
		if _, err := rcv.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcv.RefuseSeq(1, "no"); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Ack(2); err != nil {
		t.Fatal(err)
	}
	want := []Ack{{Seq: 1, Refused: true, Reason: "no"}, {Seq: 2}}
	var got []Ack
	for len(got) < len(want) { // TakeAcks blocks until one arrives
		var ok bool
		if got, ok = snd.TakeAcks(got); !ok {
			t.Fatal("TakeAcks says the session ended")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("acks %+v, want %+v", got, want)
	}
	// Unread acks past 2×window+2 = 6 fail the connection, as with Acks.
	for seq := uint64(3); seq <= 9; seq++ {
		_ = rcv.Ack(seq)
	}
	if err := waitDone(t, c); !errors.Is(err, ErrWindow) {
		t.Fatalf("connection ended with %v, want ErrWindow", err)
	}
	for {
		var ok bool
		if got, ok = snd.TakeAcks(got[:0]); !ok {
			break
		}
	}
}

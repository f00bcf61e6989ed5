package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// openSub opens a subscribe session from client and accepts it on server.
func openSub(t testing.TB, client, server *Conn, address string, cw, sw uint32) (sub, srv *Session) {
	t.Helper()
	got := make(chan *Session, 1)
	go func() {
		s, err := server.Accept(context.Background())
		if err != nil {
			close(got)
			return
		}
		if !s.Subscribe() || s.Publish() || s.File() || s.Address() != address {
			t.Errorf("server sees subscribe %v publish %v file %v address %q", s.Subscribe(), s.Publish(), s.File(), s.Address())
		}
		if err := s.Accept(sw); err != nil {
			t.Errorf("accept: %v", err)
		}
		got <- s
	}()
	sub, err := client.OpenSubscribe(context.Background(), address, cw)
	if err != nil {
		t.Fatalf("open subscribe %s: %v", address, err)
	}
	if srv = <-got; srv == nil {
		t.FailNow()
	}
	return sub, srv
}

func within(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSubscribeCreditDeliverSettle(t *testing.T) {
	c, s := tcpPair(t, testConfig("app-1"), testConfig("hub-1"))
	sub, srv := openSub(t, c, s, "orders", 4, 100)
	ctx := within(t)
	if sub.Window() != 4 || srv.Window() != 4 {
		t.Fatalf("windows %d/%d, want 4", sub.Window(), srv.Window())
	}
	if n, err := srv.WaitCredit(ctx); err != nil || n != 4 {
		t.Fatalf("initial credit %d, %v; want the window, 4", n, err)
	}
	for tag := uint64(1); tag <= 4; tag++ {
		d := Deliver{Tag: tag, Attempt: uint32(tag), Reason: "r", Message: []byte(fmt.Sprint("m", tag))}
		if err := srv.Deliver(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Deliver(ctx, Deliver{Tag: 5}); !errors.Is(err, ErrWindow) {
		t.Fatalf("Deliver without credit: %v, want ErrWindow", err)
	}
	for tag := uint64(1); tag <= 4; tag++ {
		d, err := sub.NextDelivery(ctx)
		if err != nil || d.Tag != tag || d.Attempt != uint32(tag) || d.Reason != "r" || string(d.Message) != fmt.Sprint("m", tag) {
			t.Fatalf("delivery %d: %+v %v", tag, d, err)
		}
	}
	if _, ok := sub.TryNextDelivery(); ok {
		t.Fatal("a fifth delivery")
	}
	if err := sub.Grant(3); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.WaitCredit(ctx); err != nil || n != 3 {
		t.Fatalf("credit after Grant(3): %d, %v", n, err)
	}
	// WaitGranted counts what Credit packets granted, not the window.
	if g, err := srv.WaitGranted(ctx, 0); err != nil || g != 3 {
		t.Fatalf("granted after Grant(3): %d, %v", g, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if g, err := srv.WaitGranted(short, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitGranted past what was granted: %d, %v; want it to wait", g, err)
	}
	cancel()
	if err := sub.Grant(1); err != nil {
		t.Fatal(err)
	}
	if g, err := srv.WaitGranted(ctx, 3); err != nil || g != 4 {
		t.Fatalf("granted after Grant(1): %d, %v", g, err)
	}
	many := make([]uint64, MaxSettleTags+10)
	for i := range many {
		many[i] = uint64(i + 1)
	}
	if err := sub.Settle(SettleAck, many, ""); err != nil {
		t.Fatal(err)
	}
	if err := sub.Settle(SettleNack, []uint64{3}, "boom"); err != nil {
		t.Fatal(err)
	}
	var got []Settle
	for n := 0; len(got) < 3; n++ {
		var err error
		if got, err = srv.WaitSettles(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 3 || len(got[0].Tags) != MaxSettleTags || len(got[1].Tags) != 10 || got[1].Tags[9] != uint64(len(many)) ||
		got[2].Op != SettleNack || got[2].Reason != "boom" {
		t.Fatalf("settles: %d, ops %v", len(got), got[len(got)-1])
	}
}

func TestSubscribeEndDropsBufferedDeliveries(t *testing.T) {
	c, s := pair(t, testConfig("app-1"), testConfig("hub-1"))
	sub, srv := openSub(t, c, s, "orders", 4, 4)
	ctx := within(t)
	if err := srv.Deliver(ctx, Deliver{Tag: 1, Attempt: 1, Message: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for sub.Buffered() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Settles sent before the close are still taken by the server.
	if err := sub.Settle(SettleRelease, []uint64{1}, ""); err != nil {
		t.Fatal(err)
	}
	if err := srv.Deliver(ctx, Deliver{Tag: 2, Attempt: 1, Message: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(ctx, "bye"); err != nil {
		t.Fatal(err)
	}
	<-sub.Done()
	if _, err := sub.NextDelivery(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextDelivery after the end: %v, want ErrClosed", err)
	}
	if _, ok := sub.TryNextDelivery(); ok {
		t.Fatal("TryNextDelivery returned a delivery of an ended session")
	}
	got, err := srv.WaitSettles(ctx, nil)
	if err != nil || len(got) != 1 || got[0].Op != SettleRelease {
		t.Fatalf("settles after close: %+v, %v", got, err)
	}
	if _, err := srv.WaitSettles(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitSettles once drained: %v", err)
	}
	if _, err := srv.WaitCredit(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitCredit after the end: %v", err)
	}
}

func TestPublishAndDenials(t *testing.T) {
	c, s := pair(t, testConfig("app-1"), testConfig("hub-1"))
	ctx := within(t)
	go func() {
		for {
			sess, err := s.Accept(ctx)
			if err != nil {
				return
			}
			switch {
			case sess.Publish() && sess.Address() == "":
				_ = sess.Accept(8)
				go func() {
					d, err := sess.Recv(ctx)
					if err == nil {
						_ = sess.DenySeq(d.Seq, "app-1 may not send to secret")
						_ = sess.RefuseSeq(d.Seq+1, "no such address")
					}
				}()
			case sess.Subscribe() && sess.Address() == "secret":
				_ = sess.Deny("app-1 may not consume secret")
			default:
				_ = sess.Refuse("unexpected session")
			}
		}
	}()
	pub, err := c.OpenPublish(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Publish() {
		t.Fatal("publish session does not say so")
	}
	if err := pub.SendData(ctx, 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if a := <-pub.Acks(); !a.Refused || !a.Denied || a.Reason != "app-1 may not send to secret" {
		t.Fatalf("ack %+v, want a denial", a)
	}
	if a := <-pub.Acks(); !a.Refused || a.Denied {
		t.Fatalf("ack %+v, want a plain refusal", a)
	}
	_, err = c.OpenSubscribe(ctx, "secret", 4)
	var remote *RemoteError
	if !errors.Is(err, ErrDenied) || !errors.As(err, &remote) || remote.Code != CodeDenied || !strings.Contains(remote.Reason, "may not consume") {
		t.Fatalf("subscribe denied: %v", err)
	}
	if _, err := c.OpenSubscribe(ctx, "other", 4); !errors.Is(err, ErrRefused) || errors.Is(err, ErrDenied) {
		t.Fatalf("subscribe refused: %v", err)
	}
}

func TestSubscribeWrongSideCalls(t *testing.T) {
	c, s := pair(t, testConfig("app-1"), testConfig("hub-1"))
	ctx := within(t)
	sub, srv := openSub(t, c, s, "q", 2, 2)
	snd, rcv := openPair(t, c, s, "q", 2, 2)
	for name, err := range map[string]error{
		"client WaitCredit":    func() error { _, err := sub.WaitCredit(ctx); return err }(),
		"client Deliver":       sub.Deliver(ctx, Deliver{Tag: 1}),
		"client WaitSettles":   func() error { _, err := sub.WaitSettles(ctx, nil); return err }(),
		"server Grant":         srv.Grant(1),
		"server Settle":        srv.Settle(SettleAck, []uint64{1}, ""),
		"server NextDelivery":  func() error { _, err := srv.NextDelivery(ctx); return err }(),
		"plain Grant":          snd.Grant(1),
		"plain Deliver":        rcv.Deliver(ctx, Deliver{Tag: 1}),
		"sender DenySeq":       snd.DenySeq(1, "x"),
		"oversize Deliver":     srv.Deliver(ctx, Deliver{Tag: 1, Message: make([]byte, DefaultMaxFrame)}),
		"plain WaitCredit":     func() error { _, err := rcv.WaitCredit(ctx); return err }(),
		"plain NextDelivery":   func() error { _, err := snd.NextDelivery(ctx); return err }(),
		"subscribe SendData":   sub.SendData(ctx, 1, nil),
		"server TryNext is ok": nil,
	} {
		want := ErrProtocol
		if name == "oversize Deliver" {
			want = ErrFrameTooLarge
		}
		if name != "server TryNext is ok" && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if _, ok := srv.TryNextDelivery(); ok {
		t.Error("server TryNextDelivery returned something")
	}
}

// Bad subscribe traffic from a client closes its connection.
func TestSubscribeBadClients(t *testing.T) {
	create := func(flags uint8) []byte {
		return frame(TypeSessionCreate, flags, 1, SessionCreate{Versions: []uint16{1}, Address: "q", Window: 4})
	}
	tests := []struct {
		name       string
		open, then []byte // then is written once open is answered
		err        error
		text       string
	}{
		{"two kinds", nil, create(FlagPublish | FlagSubscribe), ErrProtocol, "at most one"},
		{"credit past window", create(FlagSubscribe), frame(TypeCredit, 0, 1, Credit{N: 1}), ErrWindow, "past the window"},
		{"credit on plain session", create(0), frame(TypeCredit, 0, 1, Credit{N: 1}), ErrProtocol, "not a subscribe session"},
		{"settle on publish session", create(FlagPublish), frame(TypeSettle, 0, 1, Settle{Op: SettleAck, Tags: []uint64{1}}), ErrProtocol, "not a subscribe session"},
		{"data on subscribe session", create(FlagSubscribe), frame(TypeData, 0, 1, Data{Seq: 1}), ErrProtocol, "Data on subscribe session"},
		{"deliver to server", nil, frame(TypeDeliver, 0, 1, Deliver{Tag: 1}), ErrProtocol, "sent to the server"},
		{"malformed settle", create(FlagSubscribe), frame(TypeSettle, 0, 1, Settle{Op: 9, Tags: []uint64{1}}), ErrMalformed, "unknown op"},
		{"settle before accept", nil, append(create(FlagSubscribe), frame(TypeSettle, 0, 1, Settle{Op: SettleAck, Tags: []uint64{1}})...), ErrProtocol, "before it was accepted"},
		{"settle flood", create(FlagSubscribe), settleFlood(1, 4), ErrLimit, "settled tags"},
	}
	l := listen(t, testConfig("hub-1"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := l.dial(t)
			rawClient(t, nc, "mallory")
			r := l.next(t)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if tc.open != nil {
				// Only a session opened first is accepted: "settle before
				// accept" must reach a session nobody has accepted yet.
				go acceptAllQuietly(r.c)
			}
			go func() {
				if tc.open != nil {
					if _, err := nc.Write(tc.open); err != nil {
						return
					}
					if h, _, err := ReadFrame(nc, 1<<20, nil); err != nil || h.Type != TypeSessionCreateResponse {
						return
					}
				}
				_, _ = nc.Write(tc.then)
			}()
			err := waitDone(t, r.c)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Err %v, want %v with %q", err, tc.err, tc.text)
			}
		})
	}
}

// settleFlood is more settled tags than a subscribe session of window w
// lets wait, in full Settles.
func settleFlood(sid uint32, w uint32) []byte {
	tags := make([]uint64, MaxSettleTags)
	var b []byte
	for range settleBacklog(w)/MaxSettleTags + 1 {
		b = append(b, frame(TypeSettle, 0, sid, Settle{Op: SettleAck, Tags: tags})...)
	}
	return b
}

// acceptAllQuietly accepts every session and takes nothing from it, so
// that whatever arrives stays queued.
func acceptAllQuietly(c *Conn) {
	for {
		s, err := c.Accept(context.Background())
		if err != nil {
			return
		}
		_ = s.Accept(4)
	}
}

// A server that delivers past the client's credit is disconnected.
func TestDeliverPastCredit(t *testing.T) {
	cn, sn := net.Pipe()
	defer sn.Close()
	go func() {
		sid, err := rawSession(t, sn, 2)
		if err != nil {
			return
		}
		for tag := range uint64(3) {
			if _, err := sn.Write(frame(TypeDeliver, 0, sid, Deliver{Tag: tag + 1, Attempt: 1})); err != nil {
				return
			}
		}
		_, _ = readUntilError(sn)
	}()
	c, err := Client(context.Background(), cn, testConfig("app-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Open may return first, or fail: the deliveries may beat the response
	// to it.
	_, _ = c.OpenSubscribe(context.Background(), "q", 2)
	if err := waitDone(t, c); !errors.Is(err, ErrWindow) || !strings.Contains(err.Error(), "past its credit") {
		t.Fatalf("Err %v, want ErrWindow", err)
	}
}

// TestOpenTopic: a topic subscribe session carries its pattern as the
// address and its subscription to the server, and is a subscribe session
// there; a plain subscribe session has no topic.
func TestOpenTopic(t *testing.T) {
	c, s := tcpPair(t, testConfig("app-1"), testConfig("hub-1"))
	got := make(chan *Session, 1)
	go func() {
		defer close(got)
		for range 2 {
			srv, err := s.Accept(context.Background())
			if err != nil {
				return
			}
			if err := srv.Accept(8); err != nil {
				t.Errorf("accept: %v", err)
			}
			got <- srv
		}
	}()
	want := TopicSubscription{Name: "audit", Durable: true}
	if _, err := c.OpenTopic(within(t), "orders.#", want, 8); err != nil {
		t.Fatal(err)
	}
	srv := <-got
	if sub, ok := srv.Topic(); !ok || sub != want || srv.Address() != "orders.#" || !srv.Subscribe() {
		t.Fatalf("server sees topic %+v %v, address %q, subscribe %v; want %+v on orders.#", sub, ok, srv.Address(), srv.Subscribe(), want)
	}
	if _, err := c.OpenSubscribe(within(t), "orders", 8); err != nil {
		t.Fatal(err)
	}
	if srv = <-got; srv == nil {
		t.FailNow()
	}
	if _, ok := srv.Topic(); ok {
		t.Fatal("a plain subscribe session has a topic")
	}
}

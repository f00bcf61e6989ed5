package session

import (
	"context"
	"testing"
)

// A server's PublishWindow raises the window of a client's publish
// session above what Accept is given, up to the client's request, and
// leaves a link's session at Accept's window: a link's sender keeps a
// message count, a client bounds its flight in bytes as well.
func TestPublishWindowRaisesPublishSessionsOnly(t *testing.T) {
	scfg := testConfig("hub-1")
	scfg.PublishWindow = 4096
	c, s := pair(t, testConfig("app-1"), scfg)
	ctx := within(t)
	accepted := make(chan *Session, 3)
	go func() {
		for range 3 {
			sess, err := s.Accept(context.Background())
			if err != nil {
				t.Errorf("accept: %v", err)
				close(accepted)
				return
			}
			if err := sess.Accept(100); err != nil {
				t.Errorf("accept session: %v", err)
			}
			accepted <- sess
		}
	}()
	for _, tc := range []struct {
		name      string
		open      func() (*Session, error)
		want      uint32
		publishes bool
	}{
		{"publish asking more", func() (*Session, error) { return c.OpenPublish(ctx, 8192) }, 4096, true},
		{"publish asking less", func() (*Session, error) { return c.OpenPublish(ctx, 2000) }, 2000, true},
		{"link", func() (*Session, error) { return c.Open(ctx, "q", 8192) }, 100, false},
	} {
		snd, err := tc.open()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rcv := <-accepted
		if rcv == nil {
			t.FailNow()
		}
		if snd.Window() != tc.want || rcv.Window() != tc.want || rcv.Publish() != tc.publishes {
			t.Errorf("%s: windows %d (client), %d (server), publish %v; want %d, publish %v",
				tc.name, snd.Window(), rcv.Window(), rcv.Publish(), tc.want, tc.publishes)
		}
		// The server buffers what the window allows: a full window of
		// packets is taken without the connection stalling.
		for seq := uint64(1); seq <= uint64(tc.want); seq++ {
			if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
				t.Fatalf("%s: send %d: %v", tc.name, seq, err)
			}
		}
		for seq := uint64(1); seq <= uint64(tc.want); seq++ {
			d, err := rcv.Recv(ctx)
			if err != nil || d.Seq != seq {
				t.Fatalf("%s: recv %d: %+v, %v", tc.name, seq, d, err)
			}
		}
	}
}

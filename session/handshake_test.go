package session

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestHandshake(t *testing.T) {
	tests := []struct {
		name           string
		client, server []byte
	}{
		{name: "no secret", client: nil, server: nil},
		{name: "shared secret", client: []byte("s3cret"), server: []byte("s3cret")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := testConfig("plant-7"), testConfig("hub-1")
			ccfg.Secret, scfg.Secret = tc.client, tc.server
			c, s := pair(t, ccfg, scfg)
			if p := c.Peer(); p.Name != "hub-1" || p.ID != scfg.ID {
				t.Errorf("client sees peer %+v", p)
			}
			if p := s.Peer(); p.Name != "plant-7" || p.ID != ccfg.ID {
				t.Errorf("server sees peer %+v", p)
			}
			openPair(t, c, s, "orders@hub-1", 10, 10)
		})
	}
}

func TestHandshakeAuthFailures(t *testing.T) {
	tests := []struct {
		name           string
		client, server []byte
		serverErr      string // the server's own error; "" if its handshake succeeds
		clientErr      string
	}{
		{name: "wrong secret", client: []byte("guess"), server: []byte("s3cret"),
			serverErr: "wrong MAC", clientErr: "authentication failed: client \"plant-7\" sent a wrong MAC"},
		{name: "missing secret", client: nil, server: []byte("s3cret"),
			serverErr: "sent no MAC, but this side requires a shared secret", clientErr: "sent no MAC"},
		// The server has no secret, so it cannot prove one: the client
		// refuses it after AuthOK and tells it so.
		{name: "server without secret", client: []byte("s3cret"), server: nil,
			clientErr: "server \"hub-1\" sent no MAC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := testConfig("plant-7"), testConfig("hub-1")
			ccfg.Secret, scfg.Secret = tc.client, tc.server
			cn, sn := net.Pipe()
			c, s, cerr, serr := handshakePair(cn, sn, ccfg, scfg)
			if c != nil {
				t.Fatal("client handshake succeeded")
			}
			if !errors.Is(cerr, ErrAuth) || !strings.Contains(cerr.Error(), tc.clientErr) {
				t.Errorf("client error %v, want ErrAuth with %q", cerr, tc.clientErr)
			}
			if tc.serverErr == "" {
				if serr != nil {
					t.Fatalf("server error %v", serr)
				}
				// The server's connection dies with the client's report
				// before any session could be opened.
				if err := waitDone(t, s); !errors.Is(err, ErrAuth) {
					t.Errorf("server connection died with %v, want ErrAuth", err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if sess, err := s.Accept(ctx); sess != nil || !errors.Is(err, ErrAuth) {
					t.Errorf("Accept returned %v, %v", sess, err)
				}
				s.Close()
				return
			}
			if s != nil {
				t.Fatal("server handshake succeeded")
			}
			if !errors.Is(serr, ErrAuth) || !strings.Contains(serr.Error(), tc.serverErr) {
				t.Errorf("server error %v, want ErrAuth with %q", serr, tc.serverErr)
			}
		})
	}
}

// TestAuthFailureOpensNoSession pipelines a SessionCreate right after a
// wrong Auth: the server must refuse before it reads it.
func TestAuthFailureOpensNoSession(t *testing.T) {
	cn, sn := net.Pipe()
	defer cn.Close()
	scfg := testConfig("hub-1")
	scfg.Secret = []byte("s3cret")
	result := make(chan error, 1)
	go func() {
		c, err := Server(context.Background(), sn, scfg)
		if c != nil {
			c.Close()
		}
		result <- err
	}()
	if _, _, err := ReadFrame(cn, preAuthMaxFrame, nil); err != nil {
		t.Fatal(err)
	}
	in := frame(TypeAuth, 0, 0, Auth{Version: 1, Name: "mallory", MAC: make([]byte, 32)})
	in = append(in, frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Name: "mallory", Address: "orders", Window: 1})...)
	go func() { _, _ = cn.Write(in) }()
	e, err := readUntilError(cn)
	if err != nil || e.Code != CodeAuth || !strings.HasPrefix(e.Reason, "authentication failed: ") {
		t.Fatalf("client got %+v, %v; want CodeAuth", e, err)
	}
	if err := <-result; !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "mallory") {
		t.Fatalf("server: %v, want ErrAuth naming the client", err)
	}
}

// TestClientRefusesImpostorServer: a server that does not know the
// secret cannot fake AuthOK.
func TestClientRefusesImpostorServer(t *testing.T) {
	for _, mac := range [][]byte{nil, make([]byte, 32), []byte("short")} {
		cn, sn := net.Pipe()
		ccfg := testConfig("plant-7")
		ccfg.Secret = []byte("s3cret")
		go func() {
			defer sn.Close()
			_, _ = rawServer(t, sn, Hello{MinVersion: 1, MaxVersion: 1, Name: "impostor"}, AuthOK{MAC: mac})
			_, _ = readUntilError(sn)
		}()
		c, err := Client(context.Background(), cn, ccfg)
		if c != nil || !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), `server "impostor"`) {
			t.Fatalf("MAC %x: client %v, %v; want ErrAuth", mac, c, err)
		}
	}
}

func TestHandshakeVersions(t *testing.T) {
	tests := []struct {
		name           string
		client, server [2]uint16
		err            bool
	}{
		{name: "same", client: [2]uint16{1, 1}, server: [2]uint16{1, 1}},
		{name: "overlap", client: [2]uint16{1, 3}, server: [2]uint16{2, 5}},
		{name: "client newer", client: [2]uint16{2, 2}, server: [2]uint16{1, 1}, err: true},
		{name: "client older", client: [2]uint16{1, 1}, server: [2]uint16{2, 3}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := testConfig("plant-7"), testConfig("hub-1")
			ccfg.versions, scfg.versions = tc.client, tc.server
			cn, sn := net.Pipe()
			c, s, cerr, serr := handshakePair(cn, sn, ccfg, scfg)
			if !tc.err {
				if cerr != nil || serr != nil {
					t.Fatalf("client %v, server %v", cerr, serr)
				}
				c.Close()
				s.Close()
				return
			}
			if !errors.Is(cerr, ErrVersion) || !errors.Is(serr, ErrVersion) {
				t.Fatalf("client %v, server %v; want ErrVersion on both", cerr, serr)
			}
			var remote *RemoteError
			if !errors.As(serr, &remote) || remote.Code != CodeVersion || !strings.Contains(remote.Reason, "speaks versions") {
				t.Fatalf("server error %v, want the client's CodeVersion report", serr)
			}
		})
	}
}

// TestSessionVersionRefusal: a client that offers only version 2 in
// SessionCreate is refused by the package, with both sides' versions named,
// and the server's Accept never sees it.
func TestSessionVersionRefusal(t *testing.T) {
	cn, sn := net.Pipe()
	defer cn.Close()
	s, err := startServer(t, sn, testConfig("hub-1"), func() { rawClient(t, cn, "plant-7") })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		_, _ = cn.Write(frame(TypeSessionCreate, 0, 5, SessionCreate{Versions: []uint16{2}, Name: "plant-7", Address: "orders", Window: 10}))
	}()
	h, p, err := ReadFrame(cn, 1<<20, nil)
	if err != nil || h.Type != TypeSessionCreateResponse || h.Session != 5 || h.Flags != FlagNoCommonVersion {
		t.Fatalf("got %+v, %v", h, err)
	}
	r, err := DecodeSessionCreateResponse(p)
	if err != nil || r.Version != 0 || !strings.Contains(r.Reason, "[2]") || !strings.Contains(r.Reason, "1 to 1") {
		t.Fatalf("response %+v, %v", r, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if sess, err := s.Accept(ctx); sess != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept returned %v, %v", sess, err)
	}
	cn.Close() // before s.Close, which would otherwise wait to tell it
}

// TestOpenVersionRefused: the client's Open reports ErrVersion (not
// ErrRefused) when the server refuses for lack of a common version.
func TestOpenVersionRefused(t *testing.T) {
	cn, sn := net.Pipe()
	go func() {
		defer sn.Close()
		if _, err := rawServer(t, sn, Hello{MinVersion: 1, MaxVersion: 2, Name: "future"}, AuthOK{}); err != nil {
			return
		}
		h, _, err := ReadFrame(sn, 1<<20, nil)
		for err == nil && h.Type != TypeSessionCreate {
			h, _, err = ReadFrame(sn, 1<<20, nil)
		}
		if err != nil {
			return
		}
		resp := SessionCreateResponse{Reason: "client offers [1], server speaks 2 to 2", Name: "future"}
		_, _ = sn.Write(frame(TypeSessionCreateResponse, FlagNoCommonVersion, h.Session, resp))
		_, _ = readUntilError(sn)
	}()
	c, err := Client(context.Background(), cn, testConfig("plant-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Open(context.Background(), "orders", 10)
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "server speaks 2 to 2") {
		t.Fatalf("Open: %v, want ErrVersion with the reason", err)
	}
}

// startServer runs Server on sn while peer plays the client.
func startServer(t *testing.T, sn net.Conn, cfg Config, peer func()) (*Conn, error) {
	t.Helper()
	type result struct {
		c   *Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Server(context.Background(), sn, cfg)
		done <- result{c, err}
	}()
	peer()
	r := <-done
	return r.c, r.err
}

func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		go func() { _, _, _ = ReadFrame(cn, preAuthMaxFrame, nil) }() // reads Hello, then silence
		cfg := testConfig("hub-1")
		cfg.HandshakeTimeout = 3 * time.Second
		start := time.Now()
		c, err := Server(context.Background(), sn, cfg)
		if c != nil || !strings.Contains(fmtErr(err), "no Auth within the handshake timeout") {
			t.Fatalf("Server: %v, %v", c, err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("gave up after %v, want 3s", d)
		}
	})
}

func TestHandshakeContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		c, err := Client(ctx, cn, testConfig("plant-7")) // the server never says Hello
		if c != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("Client: %v, %v; want context.Canceled", c, err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("gave up after %v, want 1s", d)
		}
		_ = sn.Close()
	})
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "no name", cfg: Config{}, want: "Name is empty"},
		{name: "long name", cfg: Config{Name: strings.Repeat("n", maxNameLen+1)}, want: "longer than"},
		{name: "tiny frame", cfg: Config{Name: "a", MaxFrame: 10}, want: "MaxFrame 10"},
	}
	for _, tc := range tests {
		cn, sn := net.Pipe()
		_, err := Client(context.Background(), cn, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		// Client closed cn: the other end sees it.
		if _, err := sn.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: connection left open", tc.name)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

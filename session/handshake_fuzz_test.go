package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// FuzzPreAuth feeds arbitrary bytes, as what a peer sends before it is
// authenticated, to either side of the connection handshake: the server
// (serverHandshake: readHandshake, DecodeAuth, the version and MAC checks)
// or the client (clientHandshake: Hello, then AuthOK). The first byte
// chooses the side and the configuration:
//
//	bit 0  0: this side is the server, the input is a client's; 1: the client
//	bit 1  this side has a shared secret
//	bit 2  (server) per-identity credentials: plant-7 by certificate, plant-9 by secret
//
// The handshake must never panic, must return an error or a peer it
// proved, and must stay within the pre-auth bounds: no read into a buffer
// over preAuthMaxFrame (so no payload buffer over it is allocated), no
// more read than the frames it expects can hold, and no allocation of the
// size a length field claims. A side with a secret never authenticates a
// peer that cannot know the nonce it drew.
func FuzzPreAuth(f *testing.F) {
	id := message.NodeID{0: 0x7, 15: 0x7}
	auth := frame(TypeAuth, 0, 0, Auth{Version: 1, Name: "plant-7", ID: id, Nonce: gClientNonce})
	authMAC := frame(TypeAuth, 0, 0, Auth{Version: 1, Name: "plant-9", ID: id, Nonce: gClientNonce, MAC: gClientMAC[:]})
	hello := frame(TypeHello, 0, 0, Hello{MinVersion: 1, MaxVersion: 1, Nonce: gServerNonce, Name: "hub-1", ID: gServerID})
	ok := frame(TypeAuthOK, 0, 0, AuthOK{})
	okMAC := frame(TypeAuthOK, 0, 0, AuthOK{MAC: gServerMAC[:]})
	refused := frame(TypeError, 0, 0, ErrorPacket{Code: CodeAuth, Reason: "who are you"})
	huge := func(t Type) []byte { return AppendHeader(nil, Header{Type: t, Length: 0xffffffff}) }
	// The longest name a pre-auth frame holds, of the bytes %q writes
	// longest, in a frame refused for its version.
	long := string(make([]byte, preAuthMaxFrame-HeaderLen-2-32-16-2-2))
	seeds := map[byte][][]byte{
		0: {auth, append(bytes.Clone(auth), 0), auth[:len(auth)-1], refused, huge(TypeAuth), huge(TypeError), hello,
			AppendHeader(nil, Header{Type: TypeAuth, Length: preAuthMaxFrame + 1}),
			frame(TypeAuth, 0, 0, Auth{Version: 2, Name: "plant-7"}),
			frame(TypeAuth, 0, 0, Auth{Version: 2, Name: long}),
			frame(TypeAuth, 0, 1, Auth{Version: 1, Name: "plant-7"}),
			frame(TypeAuth, FlagFile, 0, Auth{Version: 1, Name: "plant-7"}),
			[]byte("GET / HTTP/1.1\r\nHost: hub-1\r\n\r\n"),
			{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03},
			{}},
		2: {authMAC, auth},
		4: {auth, authMAC, frame(TypeAuth, 0, 0, Auth{Version: 1, Name: "no such/name", ID: id})},
		1: {append(bytes.Clone(hello), ok...), append(bytes.Clone(hello), huge(TypeAuthOK)...), hello, refused, huge(TypeHello),
			append(bytes.Clone(hello), refused...), auth,
			frame(TypeHello, 0, 0, Hello{MinVersion: 2, MaxVersion: 9, Name: "hub-1"}),
			frame(TypeHello, 0, 0, Hello{MinVersion: 2, MaxVersion: 9, Name: long}),
			frame(TypeHello, 0, 0, Hello{MinVersion: 1, MaxVersion: 0xffff, Name: "hub-1"})},
		3: {append(bytes.Clone(hello), okMAC...), append(bytes.Clone(hello), ok...)},
	}
	for mode, ins := range seeds {
		for _, in := range ins {
			f.Add(append([]byte{mode}, in...))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		mode, in := in[0], in[1:]
		r := preAuth(mode, in)
		checkPreAuth(t, mode, in, r)
		// The handshake allocates what the frames it read hold, some
		// times over (copies, error texts), never what a length claims:
		// a header that claims up to 4 GiB must cost nothing (the reads
		// checked above catch a payload buffer over preAuthMaxFrame; this
		// catches the rest): 16 pre-auth frames, the copies and error
		// texts of frames that small (a refusal quotes at most 64 bytes of
		// the peer's name). Other goroutines of the test binary may
		// allocate meanwhile, so an excess is measured again before it
		// counts.
		const bound = 16 * preAuthMaxFrame
		for try := 0; r.alloc > bound; try++ {
			if try == 2 {
				t.Fatalf("the handshake allocated %d bytes for %d bytes of input, more than %d", r.alloc, len(in), bound)
			}
			r = preAuth(mode, in)
		}
	})
}

// preAuthRun is the outcome of one handshake over the fuzzer's input.
type preAuthRun struct {
	cfg   Config
	nc    *wireConn
	peer  Peer
	err   error
	alloc uint64 // bytes allocated by the handshake
}

func preAuth(mode byte, in []byte) preAuthRun {
	client := mode&1 != 0
	name := "hub-1"
	if client {
		name = "plant-7"
	}
	cfg, err := testConfig(name).withDefaults()
	if err != nil {
		panic(err)
	}
	if mode&2 != 0 {
		cfg.Secret = []byte("s3cret")
	}
	if !client && mode&4 != 0 {
		cfg.Certified = "plant-7"
		cfg.Credentials = func(n string) (Credential, bool) {
			switch n {
			case "plant-7":
				return Credential{Kind: PeerNode}, true
			case "plant-9":
				return Credential{Kind: PeerClient, Secret: []byte("plant-9 secret")}, true
			}
			return Credential{}, false
		}
	}
	r := preAuthRun{cfg: cfg, nc: &wireConn{r: bytes.NewReader(in)}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if client {
		r.peer, r.err = clientHandshake(r.nc, &r.cfg)
	} else {
		r.peer, r.err = serverHandshake(r.nc, &r.cfg)
	}
	runtime.ReadMemStats(&after)
	r.alloc = after.TotalAlloc - before.TotalAlloc
	return r
}

func checkPreAuth(t *testing.T, mode byte, in []byte, r preAuthRun) {
	client := mode&1 != 0
	frames := 1 // the server reads Auth; the client Hello, then AuthOK
	if client {
		frames = 2
	}
	if r.nc.maxRead > preAuthMaxFrame {
		t.Fatalf("read into a buffer of %d bytes, over the pre-auth limit %d", r.nc.maxRead, preAuthMaxFrame)
	}
	if r.nc.read > frames*(HeaderLen+preAuthMaxFrame) {
		t.Fatalf("read %d bytes, more than %d pre-auth frames hold", r.nc.read, frames)
	}
	sent := splitFrames(t, r.nc.w.Bytes())

	if r.err != nil {
		var remote *RemoteError
		switch {
		case errors.As(r.err, &remote):
			// The peer refused: not echoed back.
			if n := len(sent); n > 0 && sent[n-1].Type == TypeError {
				t.Fatalf("answered the peer's Error with an Error")
			}
			return
		case errors.Is(r.err, ErrMalformed), errors.Is(r.err, ErrProtocol), errors.Is(r.err, ErrUnknownType),
			errors.Is(r.err, ErrFrameTooLarge), errors.Is(r.err, ErrVersion), errors.Is(r.err, ErrAuth),
			errors.Is(r.err, io.EOF), errors.Is(r.err, io.ErrUnexpectedEOF):
		default:
			t.Fatalf("handshake error of an unexpected kind: %v", r.err)
		}
		// This side tells the peer why, in an Error on session 0.
		if len(sent) == 0 || sent[len(sent)-1].Type != TypeError {
			t.Fatalf("refused the peer (%v) without an Error; sent %v", r.err, sent)
		}
		last := sent[len(sent)-1]
		e, err := DecodeErrorPacket(last.payload)
		if err != nil || last.Session != 0 || last.Flags != 0 || e.Code != codeFor(r.err) {
			t.Fatalf("refusal %+v: %+v, %v; want code %d on session 0", last.Header, e, err, codeFor(r.err))
		}
		return
	}

	// Authenticated: the peer is what its frames said, within bounds.
	if len(r.peer.Name) > preAuthMaxFrame {
		t.Fatalf("peer name of %d bytes", len(r.peer.Name))
	}
	first, err := firstFrame(in)
	if err != nil {
		t.Fatalf("authenticated from input whose first frame does not read: %v", err)
	}
	if client {
		h, err := DecodeHello(first)
		if err != nil {
			t.Fatalf("authenticated with a Hello that does not decode: %v", err)
		}
		if r.cfg.Secret != nil {
			t.Fatal("the client authenticated a server that cannot know its nonce")
		}
		if r.peer.Name != h.Name || r.peer.ID != h.ID || h.MinVersion > ProtocolVersion || h.MaxVersion < ProtocolVersion {
			t.Fatalf("peer %+v from Hello %+v", r.peer, h)
		}
		if len(sent) != 1 || sent[0].Type != TypeAuth {
			t.Fatalf("the client sent %v, want one Auth", sent)
		}
		return
	}
	a, err := DecodeAuth(first)
	if err != nil {
		t.Fatalf("authenticated with an Auth that does not decode: %v", err)
	}
	switch {
	case r.cfg.Credentials != nil && a.Name != r.cfg.Certified:
		t.Fatalf("the server authenticated %q, who has no certificate and cannot know its nonce", a.Name)
	case r.cfg.Credentials == nil && r.cfg.Secret != nil:
		t.Fatal("the server authenticated a client that cannot know its nonce")
	case r.peer.Name != a.Name || r.peer.ID != a.ID || a.Version != ProtocolVersion:
		t.Fatalf("peer %+v from Auth %+v", r.peer, a)
	}
	if len(sent) != 2 || sent[0].Type != TypeHello || sent[1].Type != TypeAuthOK {
		t.Fatalf("the server sent %v, want Hello and AuthOK", sent)
	}
}

type sentFrame struct {
	Header
	payload []byte
}

func (s sentFrame) String() string { return fmt.Sprintf("%s(%d bytes)", s.Type, s.Length) }

// splitFrames splits what this side wrote into frames; it must be whole
// frames of known types on session 0.
func splitFrames(t *testing.T, b []byte) []sentFrame {
	t.Helper()
	var out []sentFrame
	r := bytes.NewReader(b)
	for {
		h, p, err := ReadFrame(r, 1<<20, nil)
		if err == io.EOF {
			return out
		}
		if err != nil || !h.Type.Known() || h.Session != 0 || h.Flags != 0 {
			t.Fatalf("this side wrote a bad frame %+v: %v", h, err)
		}
		out = append(out, sentFrame{h, p})
	}
}

// firstFrame returns the payload of the first frame of in.
func firstFrame(in []byte) ([]byte, error) {
	_, p, err := ReadFrame(bytes.NewReader(in), preAuthMaxFrame, nil)
	return p, err
}

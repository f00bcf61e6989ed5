package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/petrelmq/petrel/message"
)

// The connection handshake, on session 0, before any session can open:
//
//	server                                 client
//	Hello{versions, nonceS, name, id} ---->
//	                                  <---- Auth{version, nonceC, name, id, macC}
//	AuthOK{macS}                      ---->
//
//	macC = HMAC-SHA256(secret, "petrel client" || nonceS || nonceC || clientName || clientID)
//	macS = HMAC-SHA256(secret, "petrel server" || nonceC || nonceS || serverName || serverID)
//
// Each side's MAC covers the other's fresh nonce, so a recorded exchange
// cannot be replayed, and a different label, so one side's MAC is never
// valid as the other's. A server with a secret refuses a client without
// the right MAC (CodeAuth); a client with a secret refuses a server without
// one.
//
// The secret is, in the simple mode, one shared by every member
// (Config.Secret): it proves membership, not identity. With
// Config.Credentials it is the claimed identity's own: the server looks
// the client's name up, checks macC with that identity's secret and signs
// macS with it too, and the client, which picks the secret by the name in
// Hello, checks that. The name and id are covered by both MACs, so
// neither can be changed on the way. Until AuthOK, frames are at most preAuthMaxFrame bytes and only
// Hello, Auth, AuthOK and Error are valid, and every read and write is
// bounded by HandshakeTimeout, so an unauthenticated peer costs a few KiB
// for a few seconds at most.

// Client runs the client side of the connection handshake over nc and
// starts the connection's goroutines. It closes nc and returns an error if
// the handshake fails or times out (HandshakeTimeout, or ctx): wrapping
// ErrAuth or ErrVersion when those were the cause, or a *RemoteError if the
// server reported one.
func Client(ctx context.Context, nc net.Conn, cfg Config) (*Conn, error) {
	return handshake(ctx, nc, cfg, true)
}

// Server runs the server side of the connection handshake over nc and
// starts the connection's goroutines. It closes nc and returns an error if
// the handshake fails or times out: wrapping ErrAuth for a client that
// failed the challenge (the caller may log and count it), ErrVersion,
// ErrProtocol or ErrUnknownType for a peer that does not speak the protocol.
func Server(ctx context.Context, nc net.Conn, cfg Config) (*Conn, error) {
	return handshake(ctx, nc, cfg, false)
}

func handshake(ctx context.Context, nc net.Conn, cfg Config, client bool) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	stop := bound(ctx, nc, cfg.HandshakeTimeout)
	var peer Peer
	if client {
		peer, err = clientHandshake(nc, &cfg)
	} else {
		peer, err = serverHandshake(nc, &cfg)
	}
	if !stop() && err == nil {
		err = ctx.Err() // ctx ended just now; the deadline it set may be in place
	}
	if err == nil {
		err = nc.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = nc.Close()
		if ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return start(nc, cfg, peer, client), nil
}

// bound sets the handshake's deadline on nc, and moves it to now if ctx
// ends first. The returned stop reports false if ctx ended.
func bound(ctx context.Context, nc net.Conn, timeout time.Duration) (stop func() bool) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = nc.SetDeadline(deadline)
	return context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
}

func serverHandshake(nc net.Conn, cfg *Config) (Peer, error) {
	hello := Hello{MinVersion: cfg.versions[0], MaxVersion: cfg.versions[1], Name: cfg.Name, ID: cfg.ID}
	if _, err := rand.Read(hello.Nonce[:]); err != nil {
		return Peer{}, fmt.Errorf("make nonce: %w", err)
	}
	if err := writeFrame(nc, TypeHello, hello); err != nil {
		return Peer{}, err
	}
	p, err := readHandshake(nc, TypeAuth)
	var auth Auth
	if err == nil {
		auth, err = DecodeAuth(p)
	}
	if err == nil && (auth.Version < hello.MinVersion || auth.Version > hello.MaxVersion) {
		// quote: the name is the peer's, unproven and as long as a frame
		// lets it be, and this error goes back to it.
		err = fmt.Errorf("client %s chose version %d, server speaks %d to %d: %w",
			quote(auth.Name), auth.Version, hello.MinVersion, hello.MaxVersion, ErrVersion)
	}
	peer := Peer{Name: auth.Name, ID: auth.ID, Addr: addrOf(nc)}
	var secret []byte
	if err == nil {
		peer, secret, err = authenticate(cfg, hello, auth, peer)
	}
	if err == nil && cfg.CheckPeer != nil {
		err = cfg.CheckPeer(peer)
	}
	if err != nil {
		refuse(nc, err)
		return Peer{}, err
	}
	ok := AuthOK{}
	if secret != nil {
		ok.MAC = serverMAC(secret, auth.Nonce, hello.Nonce, cfg.Name, cfg.ID)
	}
	if err := writeFrame(nc, TypeAuthOK, ok); err != nil {
		return Peer{}, err
	}
	return peer, nil
}

// authenticate checks the client's proof and returns who it is, with the
// secret the server proves itself back with (nil: none). With
// Credentials, the name the client claims is its identity and must have a
// credential here; without, the shared Secret (if any) proves only that
// the client belongs.
func authenticate(cfg *Config, hello Hello, auth Auth, peer Peer) (Peer, []byte, error) {
	who := "client " + quote(auth.Name)
	if cfg.Credentials == nil {
		peer.Kind, peer.Relay = PeerMember, true
		if cfg.Secret == nil {
			return peer, nil, nil
		}
		return peer, cfg.Secret, checkMAC(auth.MAC, clientMAC(cfg.Secret, hello.Nonce, auth.Nonce, auth.Name, auth.ID), who, "a shared secret")
	}
	if err := message.ValidName(auth.Name); err != nil {
		return peer, nil, fmt.Errorf("%w: %s claims an identity that is not a valid name (%v)", ErrAuth, who, err)
	}
	cred, ok := cfg.Credentials(auth.Name)
	if !ok {
		return peer, nil, fmt.Errorf("%w: no credentials for identity %q on this node; list it under peers to let it connect", ErrAuth, auth.Name)
	}
	peer.Kind, peer.Relay = cred.Kind, cred.Relay
	if peer.Kind == PeerMember {
		peer.Kind = PeerNode
	}
	if cred.Secret == nil {
		if cfg.Certified == "" || cfg.Certified != auth.Name {
			return peer, nil, fmt.Errorf("%w: identity %q has no secret on this node and presented no verified certificate for that name", ErrAuth, auth.Name)
		}
		return peer, nil, nil
	}
	return peer, cred.Secret, checkMAC(auth.MAC, clientMAC(cred.Secret, hello.Nonce, auth.Nonce, auth.Name, auth.ID), who, "the secret of identity "+quote(auth.Name)+" (its peers entry)")
}

func clientHandshake(nc net.Conn, cfg *Config) (Peer, error) {
	p, err := readHandshake(nc, TypeHello)
	var hello Hello
	if err == nil {
		hello, err = DecodeHello(p)
	}
	if err != nil {
		refuse(nc, err)
		return Peer{}, err
	}
	v := min(hello.MaxVersion, cfg.versions[1])
	if v < hello.MinVersion || v < cfg.versions[0] || v == 0 {
		err := fmt.Errorf("server %s speaks versions %d to %d, client %q speaks %d to %d: %w",
			quote(hello.Name), hello.MinVersion, hello.MaxVersion, cfg.Name, cfg.versions[0], cfg.versions[1], ErrVersion)
		refuse(nc, err)
		return Peer{}, err
	}
	auth := Auth{Version: v, Name: cfg.Name, ID: cfg.ID}
	if _, err := rand.Read(auth.Nonce[:]); err != nil {
		return Peer{}, fmt.Errorf("make nonce: %w", err)
	}
	secret := cfg.Secret
	if cfg.Credentials != nil {
		if cred, ok := cfg.Credentials(hello.Name); ok && cred.Secret != nil {
			secret = cred.Secret
		}
	}
	if secret != nil {
		auth.MAC = clientMAC(secret, hello.Nonce, auth.Nonce, cfg.Name, cfg.ID)
	}
	if err := writeFrame(nc, TypeAuth, auth); err != nil {
		return Peer{}, err
	}
	p, err = readHandshake(nc, TypeAuthOK)
	var ok AuthOK
	if err == nil {
		ok, err = DecodeAuthOK(p)
	}
	if err == nil && secret != nil {
		err = checkMAC(ok.MAC, serverMAC(secret, auth.Nonce, hello.Nonce, hello.Name, hello.ID), "server "+quote(hello.Name), "a secret")
	}
	if err != nil {
		refuse(nc, err)
		return Peer{}, err
	}
	return Peer{Name: hello.Name, ID: hello.ID, Addr: addrOf(nc), Kind: PeerNode}, nil
}

// readHandshake reads the frame the handshake expects next and returns its
// payload. The header is checked before the payload is read: the type
// first, so that a peer speaking another protocol gets a clear error rather
// than a complaint about a huge length. The caller refuses the peer.
func readHandshake(nc net.Conn, want Type) ([]byte, error) {
	var hb [HeaderLen]byte
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			hint := ""
			if want == TypeHello {
				// A TLS server waits for the client to speak first.
				hint = " (if the peer's listener speaks TLS, dial it with a tls:// connector)"
			}
			return nil, fmt.Errorf("no %s within the handshake timeout%s: %w", want, hint, err)
		}
		return nil, fmt.Errorf("read %s: %w", want, err)
	}
	h, _ := ParseHeader(hb[:])
	var err error
	switch {
	case !h.Type.Known():
		err = fmt.Errorf("expected %s, got a frame of unknown type %d%s: %w", want, uint8(h.Type), guessProtocol(hb), ErrUnknownType)
	case h.Type != want && h.Type != TypeError || h.Session != 0 || h.Flags != 0:
		err = fmt.Errorf("expected %s on session 0, got %s on session %d with flags %#02x: %w", want, h.Type, h.Session, h.Flags, ErrProtocol)
	case h.Length > preAuthMaxFrame:
		err = tooLarge(h, preAuthMaxFrame)
	}
	if err != nil {
		return nil, err
	}
	p, err := readPayload(nc, h, nil)
	if err != nil {
		return nil, err
	}
	if h.Type == TypeError {
		e, err := DecodeErrorPacket(p)
		if err != nil {
			return nil, err
		}
		return nil, &RemoteError{Code: e.Code, Reason: e.Reason}
	}
	return p, nil
}

// guessProtocol names the protocol a peer probably speaks, from the first
// bytes it sent, for the error.
func guessProtocol(hb [HeaderLen]byte) string {
	switch {
	case hb[0] == 0x16 && hb[1] == 0x03:
		return " (a TLS handshake: is the peer using a tls:// connector on a plain listener?)"
	case hb[0] >= 'A' && hb[0] <= 'Z' && hb[1] >= 'A' && hb[1] <= 'Z':
		return fmt.Sprintf(" (text %q: an HTTP or other text client?)", hb[:])
	}
	return ""
}

// refuse tells the peer, best effort, why the handshake failed. Errors the
// peer reported itself are not echoed back.
func refuse(nc net.Conn, err error) {
	var remote *RemoteError
	if errors.As(err, &remote) {
		return
	}
	_ = writeFrame(nc, TypeError, ErrorPacket{Code: codeFor(err), Reason: err.Error()})
}

// writeFrame writes one frame on session 0 during the handshake.
func writeFrame(nc net.Conn, t Type, p appender) error {
	b := AppendHeader(make([]byte, 0, 128), Header{Type: t})
	b = p.AppendBinary(b)
	be.PutUint32(b[6:], uint32(len(b)-HeaderLen))
	if _, err := nc.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", t, err)
	}
	return nil
}

func clientMAC(secret []byte, serverNonce, clientNonce [32]byte, name string, id message.NodeID) []byte {
	return mac(secret, "petrel client", serverNonce, clientNonce, name, id)
}

func serverMAC(secret []byte, clientNonce, serverNonce [32]byte, name string, id message.NodeID) []byte {
	return mac(secret, "petrel server", clientNonce, serverNonce, name, id)
}

func mac(secret []byte, label string, first, second [32]byte, name string, id message.NodeID) []byte {
	m := hmac.New(sha256.New, secret)
	_, _ = io.WriteString(m, label)
	_, _ = m.Write(first[:])
	_, _ = m.Write(second[:])
	_, _ = io.WriteString(m, name)
	_, _ = m.Write(id[:])
	return m.Sum(nil)
}

// checkMAC checks the MAC who sent, proving secret (what the other side
// is held to, in words: a shared secret, or an identity's own), so that a
// missing one is told which secret to give.
func checkMAC(got, want []byte, who, secret string) error {
	switch {
	case len(got) == 0:
		return fmt.Errorf("%w: %s sent no MAC, but this side requires %s", ErrAuth, who, secret)
	case !hmac.Equal(got, want):
		return fmt.Errorf("%w: %s sent a wrong MAC; check that both sides have the same secret", ErrAuth, who)
	}
	return nil
}

func addrOf(nc net.Conn) string {
	if a := nc.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

package session

import "github.com/petrelmq/petrel/message"

// Packets on session 0: the handshake, connection-level errors and
// heartbeats. Each has AppendBinary, which appends the payload (without the
// frame header), and a Decode function that accepts exactly what
// AppendBinary produces: it checks every length against the bytes that
// remain, refuses trailing bytes with ErrMalformed, never panics and never
// retains its input.

// Hello is the server's first frame: the protocol versions it speaks, a fresh
// random nonce for this connection, and its identity.
//
//	offset  field        type      notes
//	[ 0]    minVersion   uint16
//	[ 2]    maxVersion   uint16
//	[ 4]    nonce        [32]byte  crypto/rand, new for every connection
//	[36]    id           [16]byte  server NodeID
//	[52]    name         str16     server node name
type Hello struct {
	MinVersion, MaxVersion uint16
	Nonce                  [32]byte
	Name                   string
	ID                     message.NodeID
}

// AppendBinary appends the encoding of h to dst.
func (h Hello) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint16(dst, h.MinVersion)
	dst = be.AppendUint16(dst, h.MaxVersion)
	dst = append(dst, h.Nonce[:]...)
	dst = append(dst, h.ID[:]...)
	return appendStr16(dst, h.Name)
}

// DecodeHello decodes a Hello payload.
func DecodeHello(p []byte) (Hello, error) {
	d := decoder{p: p, pkt: "Hello"}
	h := Hello{
		MinVersion: d.u16("minVersion"),
		MaxVersion: d.u16("maxVersion"),
		Nonce:      d.nonce("nonce"),
		ID:         d.nodeID("id"),
		Name:       d.str16("name"),
	}
	if err := d.finish(); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// Auth is the client's answer to Hello: the version it chose, its identity,
// its own nonce and, when it has a secret, its MAC over both nonces and its
// identity (see handshake.go).
//
//	offset  field    type      notes
//	[ 0]    version  uint16    chosen from the Hello's range
//	[ 2]    nonce    [32]byte  client nonce, crypto/rand
//	[34]    id       [16]byte  client NodeID
//	[50]    name     str16     client node name
//	        mac      str16     HMAC-SHA256, or empty when the client has no secret
type Auth struct {
	Version uint16
	Name    string
	ID      message.NodeID
	Nonce   [32]byte
	MAC     []byte // empty when the client has no secret
}

// AppendBinary appends the encoding of a to dst.
func (a Auth) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint16(dst, a.Version)
	dst = append(dst, a.Nonce[:]...)
	dst = append(dst, a.ID[:]...)
	dst = appendStr16(dst, a.Name)
	return appendBytes16(dst, a.MAC)
}

// DecodeAuth decodes an Auth payload. An empty MAC decodes as nil.
func DecodeAuth(p []byte) (Auth, error) {
	d := decoder{p: p, pkt: "Auth"}
	a := Auth{
		Version: d.u16("version"),
		Nonce:   d.nonce("nonce"),
		ID:      d.nodeID("id"),
		Name:    d.str16("name"),
		MAC:     d.bytes16("mac"),
	}
	if err := d.finish(); err != nil {
		return Auth{}, err
	}
	return a, nil
}

// AuthOK completes the handshake. The MAC proves to the client that the
// server knows the secret too; it is empty when the server has none.
//
//	offset  field  type   notes
//	[0]     mac    str16  HMAC-SHA256, or empty
type AuthOK struct {
	MAC []byte
}

// AppendBinary appends the encoding of a to dst.
func (a AuthOK) AppendBinary(dst []byte) []byte {
	return appendBytes16(dst, a.MAC)
}

// DecodeAuthOK decodes an AuthOK payload. An empty MAC decodes as nil.
func DecodeAuthOK(p []byte) (AuthOK, error) {
	d := decoder{p: p, pkt: "AuthOK"}
	a := AuthOK{MAC: d.bytes16("mac")}
	if err := d.finish(); err != nil {
		return AuthOK{}, err
	}
	return a, nil
}

// ErrorPacket reports an error. On session 0 it ends the connection, which
// the sender closes after it; on another session it ends only that session.
//
//	offset  field   type    notes
//	[0]     code    uint16  CodeProtocol ... CodeLimit
//	[2]     reason  str16   for a human: what happened and what to do
type ErrorPacket struct {
	Code   uint16
	Reason string
}

// AppendBinary appends the encoding of e to dst.
func (e ErrorPacket) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint16(dst, e.Code)
	return appendStr16(dst, e.Reason)
}

// DecodeErrorPacket decodes an Error payload.
func DecodeErrorPacket(p []byte) (ErrorPacket, error) {
	d := decoder{p: p, pkt: "Error"}
	e := ErrorPacket{Code: d.u16("code"), Reason: d.str16("reason")}
	if err := d.finish(); err != nil {
		return ErrorPacket{}, err
	}
	return e, nil
}

// Ping asks the peer for a Pong with the same nonce. Pong has the same
// layout and uses this type too.
//
//	offset  field  type    notes
//	[0]     nonce  uint64  echoed in the Pong
type Ping struct {
	Nonce uint64
}

// AppendBinary appends the encoding of p to dst.
func (p Ping) AppendBinary(dst []byte) []byte {
	return be.AppendUint64(dst, p.Nonce)
}

// DecodePing decodes a Ping or Pong payload.
func DecodePing(p []byte) (Ping, error) {
	d := decoder{p: p, pkt: "Ping"}
	q := Ping{Nonce: d.u64("nonce")}
	if err := d.finish(); err != nil {
		return Ping{}, err
	}
	return q, nil
}

package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/petrelmq/petrel/message"
)

// Golden bytes of every link frame, as the connection writes it: the
// project's rule is that every packet has them in testdata. Each case of
// goldenFrames is encoded by the writer the connection uses for it, header
// included, and compared with testdata/golden/<name>.hex; the bytes of the
// file are then read back as the read side reads them and decoded to the
// case's packet. TestFrameGoldenComplete fails when a frame type, or a flag
// bit a type may carry, has no case.
//
// A .hex file is comment lines (#) and hex digits: the 10-byte header
// (type, flags, session, length) on one line, then the payload, 16 bytes a
// line. Whitespace and comments are ignored when it is read. To rewrite
// them after a deliberate change of the wire format:
//
//	go test ./session/ -run TestFrameGolden -update-golden

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/*.hex from goldenFrames")

const goldenDir = "testdata/golden"

// wireWriter names the code that writes a frame on the connection.
type wireWriter int

const (
	viaHandshake wireWriter = iota // writeFrame: Hello, Auth, AuthOK and the Error that refuses a handshake
	viaControl                     // outbox.control: every frame but Data and Deliver after the handshake
	viaData                        // outbox.data: Session.SendData
	viaDeliver                     // outbox.deliver: Session.Deliver
	viaFinal                       // outbox.fail: the Error sent before a connection is closed
)

func (w wireWriter) String() string {
	return [...]string{"writeFrame (the handshake)", "outbox.control", "outbox.data (Session.SendData)",
		"outbox.deliver (Session.Deliver)", "outbox.fail (the final Error of a connection)"}[w]
}

type goldenFrame struct {
	name  string // the file: testdata/golden/<name>.hex; starts with the type's name in kebab case
	note  string // what the frame is, for the file's comment
	via   wireWriter
	typ   Type
	flags uint8
	sid   uint32
	pkt   appender // nil for an empty payload (SessionCloseResponse)
	err   error    // viaFinal: the error the connection fails with; pkt is the ErrorPacket it makes
}

// Distinctive values: every byte of one field differs from those of the
// fields beside it, so that a field swapped, dropped or moved changes the
// bytes. Session ids: 3 a link session, 5 a file session, 7 a publish
// session, 9 a subscribe session, 11 a topic subscribe session.
var (
	gServerID    = seqBytes16(0x10)
	gClientID    = seqBytes16(0x20)
	gServerNonce = seqBytes32(0xa0)
	gClientNonce = seqBytes32(0xc0)
	gClientMAC   = seqBytes32(0xe0)
	gServerMAC   = seqBytes32(0x60)
	gSeq         = uint64(0x0102030405) // a Data packet's seq and its answers
	gChunk       = []byte("petrel chunk 16b")
	gChunkSum    = sha256.Sum256(gChunk)
)

func seqBytes16(first byte) (id message.NodeID) {
	for i := range id {
		id[i] = first + byte(i)
	}
	return id
}

func seqBytes32(first byte) (b [32]byte) {
	for i := range b {
		b[i] = first + byte(i)
	}
	return b
}

func goldenFrames() []goldenFrame {
	macC, macS := gClientMAC, gServerMAC
	return []goldenFrame{
		// The handshake, session 0.
		{name: "hello", note: "the server's first frame", via: viaHandshake, typ: TypeHello,
			pkt: Hello{MinVersion: 1, MaxVersion: 2, Nonce: gServerNonce, Name: "hub-1", ID: gServerID}},
		{name: "auth", note: "the client's answer to Hello, with its MAC (a secret)", via: viaHandshake, typ: TypeAuth,
			pkt: Auth{Version: 1, Name: "plant-7", ID: gClientID, Nonce: gClientNonce, MAC: macC[:]}},
		{name: "auth-no-mac", note: "the client's answer to Hello without a secret (none, or a TLS certificate)", via: viaHandshake, typ: TypeAuth,
			pkt: Auth{Version: 1, Name: "plant-7", ID: gClientID, Nonce: gClientNonce}},
		{name: "auth-ok", note: "the server's proof of the secret; the connection is authenticated", via: viaHandshake, typ: TypeAuthOK,
			pkt: AuthOK{MAC: macS[:]}},
		{name: "auth-ok-no-mac", note: "AuthOK of a server without a secret", via: viaHandshake, typ: TypeAuthOK,
			pkt: AuthOK{}},
		{name: "error-handshake", note: "a handshake refused (refuse)", via: viaHandshake, typ: TypeError,
			pkt: ErrorPacket{Code: CodeAuth, Reason: `authentication failed: client "plant-7" sent a wrong MAC; check that both sides have the same secret`}},

		// Connection level, after the handshake.
		{name: "error-connection", note: "the last frame of a connection that failed (ErrWindow)", via: viaFinal, typ: TypeError,
			err: fmt.Errorf("session 3: more than 64 Data packets not yet received, the window: %w", ErrWindow)},
		{name: "ping", note: "liveness, sent when nothing was written for PingInterval", via: viaControl, typ: TypePing,
			pkt: Ping{Nonce: 0x0807060504030201}},
		{name: "pong", note: "the answer to a Ping, its nonce echoed", via: viaControl, typ: TypePong,
			pkt: Ping{Nonce: 0x0807060504030201}},

		// Opening sessions, one of each kind.
		{name: "session-create", note: "a link session: the sender serves the send queue of an address", via: viaControl, typ: TypeSessionCreate, sid: 3,
			pkt: SessionCreate{Versions: []uint16{2, 1}, Name: "plant-7", ID: gClientID, Address: "orders@hub-1", Window: 1000}},
		{name: "session-create-file", note: "a file session (FlagFile): one file's announcement and content", via: viaControl, typ: TypeSessionCreate, flags: FlagFile, sid: 5,
			pkt: SessionCreate{Versions: []uint16{1}, Name: "plant-7", ID: gClientID, Address: "inbox@hub-1", Window: 8}},
		{name: "session-create-publish", note: "a remote client's publish session (FlagPublish): no address", via: viaControl, typ: TypeSessionCreate, flags: FlagPublish, sid: 7,
			pkt: SessionCreate{Versions: []uint16{1}, Name: "scanner-2", ID: gClientID, Window: 256}},
		{name: "session-create-subscribe", note: "a remote client's subscribe session on a queue (FlagSubscribe)", via: viaControl, typ: TypeSessionCreate, flags: FlagSubscribe, sid: 9,
			pkt: SessionCreate{Versions: []uint16{1}, Name: "scanner-2", ID: gClientID, Address: "orders", Window: 32}},
		{name: "session-create-topic", note: "a subscribe session on a topic pattern (FlagSubscribe|FlagTopic), durable subscription audit", via: viaControl, typ: TypeSessionCreate, flags: FlagSubscribe | FlagTopic, sid: 11,
			pkt: SessionCreate{Versions: []uint16{1}, Name: "scanner-2", ID: gClientID, Address: "orders.#", Window: 64, Topic: &TopicSubscription{Name: "audit", Durable: true}}},
		{name: "session-create-response", note: "a session accepted: version and window", via: viaControl, typ: TypeSessionCreateResponse, sid: 3,
			pkt: SessionCreateResponse{Version: 1, Name: "hub-1", ID: gServerID, Window: 500}},
		{name: "session-create-response-refused", note: "a session refused (Version 0)", via: viaControl, typ: TypeSessionCreateResponse, sid: 3,
			pkt: SessionCreateResponse{Reason: "window 0: the sender must allow at least one packet in flight", Name: "hub-1", ID: gServerID}},
		{name: "session-create-response-no-common-version", note: "a session refused for lack of a common version (FlagNoCommonVersion)", via: viaControl, typ: TypeSessionCreateResponse, flags: FlagNoCommonVersion, sid: 3,
			pkt: SessionCreateResponse{Reason: "no common protocol version: plant-7 offers versions [2], hub-1 speaks 1 to 1", Name: "hub-1", ID: gServerID}},
		{name: "session-create-response-denied", note: "a session refused by an access rule (FlagDenied)", via: viaControl, typ: TypeSessionCreateResponse, flags: FlagDenied, sid: 9,
			pkt: SessionCreateResponse{Reason: `peer "scanner-2" may not consume "orders"`, Name: "hub-1", ID: gServerID}},

		// A link session.
		{name: "data", note: "a message on a link session; the message bytes are opaque here", via: viaData, typ: TypeData, sid: 3,
			pkt: Data{Seq: gSeq, Message: []byte("an encoded message.Message")}},
		{name: "data-ack", note: "every seq up to this one is durable", via: viaControl, typ: TypeDataAck, sid: 3,
			pkt: DataAck{Seq: gSeq}},
		{name: "refuse", note: "this seq will never be stored: the sender dead-letters it", via: viaControl, typ: TypeRefuse, sid: 3,
			pkt: Refuse{Seq: gSeq, Reason: "destination unknown: orders@nowhere"}},
		{name: "refuse-denied", note: "this seq is denied by an access rule (FlagDenied, Session.DenySeq)", via: viaControl, typ: TypeRefuse, flags: FlagDenied, sid: 3,
			pkt: Refuse{Seq: gSeq, Reason: `peer "plant-7" may not send to "orders@hub-1"`}},
		{name: "session-close", note: "a session ended in order", via: viaControl, typ: TypeSessionClose, sid: 3,
			pkt: SessionClose{Reason: "shutting down"}},
		{name: "session-close-response", note: "the answer to SessionClose: an empty payload", via: viaControl, typ: TypeSessionCloseResponse, sid: 3},
		{name: "error-session", note: "an error that ends one session", via: viaControl, typ: TypeError, sid: 3,
			pkt: ErrorPacket{Code: CodeProtocol, Reason: "Data for session 3, which is not open"}},
		{name: "error-session-full", note: "a receiver with no room ends one session (Session.Abort): its sender sends again later", via: viaControl, typ: TypeError, sid: 3,
			pkt: ErrorPacket{Code: CodeFull, Reason: "store full: max_messages 100 reached"}},

		// A file session: the announcement at seq 0, chunks whose seq is
		// their end offset, the checksum that may follow, the abort, and
		// the receiver's answers (receiver/file.go).
		{name: "data-file-announcement", note: "a file session's announcement: the file message, at seq 0", via: viaData, typ: TypeData, sid: 5,
			pkt: Data{Seq: 0, Message: []byte("an encoded file message")}},
		{name: "data-file-chunk", note: "a chunk of a file: seq is its end offset", via: viaData, typ: TypeData, sid: 5,
			pkt: Data{Seq: uint64(len(gChunk)), Message: gChunk}},
		{name: "data-file-checksum", note: "the checksum that follows a file announced without one (FileChecksumSeq)", via: viaData, typ: TypeData, sid: 5,
			pkt: Data{Seq: FileChecksumSeq, Message: AppendFileChecksum(nil, hex.EncodeToString(gChunkSum[:]))}},
		{name: "data-file-abort", note: "the sender gives the file up (FileAbortSeq): the payload is the reason", via: viaData, typ: TypeData, sid: 5,
			pkt: Data{Seq: FileAbortSeq, Message: []byte("source file removed")}},
		{name: "data-ack-file", note: "a file receiver's answer: the file stands at this offset (at its size: custody passed)", via: viaControl, typ: TypeDataAck, sid: 5,
			pkt: DataAck{Seq: uint64(len(gChunk))}},
		{name: "refuse-file-announcement", note: "a file receiver's answer at seq 0: the file is refused for good", via: viaControl, typ: TypeRefuse, sid: 5,
			pkt: Refuse{Seq: 0, Reason: "refused: file of 10 GiB, over the 1 GiB limit of inbox"}},
		{name: "refuse-file-corrupt", note: "a file receiver's answer at seq size: the content failed its checksum", via: viaControl, typ: TypeRefuse, sid: 5,
			pkt: Refuse{Seq: uint64(len(gChunk)), Reason: "content does not match the announced checksum"}},

		// A subscribe session.
		{name: "deliver", note: "one leased message, pushed to a remote client", via: viaDeliver, typ: TypeDeliver, sid: 9,
			pkt: Deliver{Tag: 0x1112131415, Attempt: 3, Reason: "expired in orders", Message: []byte("an encoded message.Message")}},
		{name: "credit", note: "more deliveries allowed", via: viaControl, typ: TypeCredit, sid: 9,
			pkt: Credit{N: 48}},
		{name: "settle", note: "deliveries nacked, with the reason", via: viaControl, typ: TypeSettle, sid: 9,
			pkt: Settle{Op: SettleNack, Tags: []uint64{0x1112131415, 0x1112131416, 0x2122232425262728}, Reason: "handler failed"}},
		{name: "settle-ack", note: "deliveries acked: no reason", via: viaControl, typ: TypeSettle, sid: 9,
			pkt: Settle{Op: SettleAck, Tags: []uint64{0x1112131415}}},
	}
}

// packet returns the packet c's frame carries: pkt, or for viaFinal the
// ErrorPacket that fail makes of err.
func (c goldenFrame) packet() appender {
	if c.via == viaFinal {
		return ErrorPacket{Code: codeFor(c.err), Reason: c.err.Error()}
	}
	return c.pkt
}

// wire encodes c with the writer the connection uses for it.
func (c goldenFrame) wire(t *testing.T) []byte {
	t.Helper()
	nc := &wireConn{r: bytes.NewReader(nil)}
	o := newOutbox(nc, Config{MaxFrame: DefaultMaxFrame, WriteTimeout: time.Second})
	var err error
	switch c.via {
	case viaHandshake:
		if c.sid != 0 || c.flags != 0 {
			t.Fatalf("%s: a handshake frame is on session 0 without flags", c.name)
		}
		if err = writeFrame(nc, c.typ, c.pkt); err != nil {
			t.Fatal(err)
		}
		return nc.w.Bytes()
	case viaControl:
		err = o.control(Header{Type: c.typ, Flags: c.flags, Session: c.sid}, c.pkt)
	case viaData:
		d := c.pkt.(Data)
		if c.typ != TypeData || c.flags != 0 {
			t.Fatalf("%s: outbox.data writes Data frames without flags", c.name)
		}
		err = o.data(context.Background(), c.sid, d.Seq, d.Message, nil)
	case viaDeliver:
		if c.typ != TypeDeliver || c.flags != 0 {
			t.Fatalf("%s: outbox.deliver writes Deliver frames without flags", c.name)
		}
		err = o.deliver(context.Background(), c.sid, c.pkt.(Deliver), nil)
	case viaFinal:
		if c.typ != TypeError || c.flags != 0 || c.sid != 0 {
			t.Fatalf("%s: outbox.fail writes an Error on session 0", c.name)
		}
		o.fail(c.err, true)
		return o.final
	}
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return o.buf
}

// read decodes frame as the side that receives it does: readHandshake and
// the handshake's decoders before authentication, the read loop's header
// check, payload read and decoder after.
func (c goldenFrame) read(frame []byte) (Header, appender, error) {
	nc := &wireConn{r: bytes.NewReader(frame)}
	if c.via == viaHandshake {
		want := c.typ
		if want == TypeError {
			want = TypeAuth // an Error comes instead of the frame expected
		}
		p, err := readHandshake(nc, want)
		var remote *RemoteError
		if errors.As(err, &remote) {
			return c.header(frame), ErrorPacket{Code: remote.Code, Reason: remote.Reason}, nc.rest()
		}
		if err != nil {
			return Header{}, nil, err
		}
		var x appender
		switch c.typ {
		case TypeHello:
			x, err = DecodeHello(p)
		case TypeAuth:
			x, err = DecodeAuth(p)
		case TypeAuthOK:
			x, err = DecodeAuthOK(p)
		default:
			err = fmt.Errorf("%s is not a handshake frame", c.typ)
		}
		if err == nil {
			err = nc.rest()
		}
		return c.header(frame), x, err
	}
	var hb [HeaderLen]byte
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, _ := ParseHeader(hb[:])
	if err := (&Conn{cfg: Config{MaxFrame: DefaultMaxFrame}}).checkHeader(h); err != nil {
		return h, nil, err
	}
	p, err := readPayload(nc, h, nil)
	if err != nil {
		return h, nil, err
	}
	if err := nc.rest(); err != nil {
		return h, nil, err
	}
	onConn := h.Type == TypePing || h.Type == TypePong
	if onConn && h.Session != 0 || h.Session == 0 && !onConn && h.Type != TypeError {
		return h, nil, fmt.Errorf("%s on session %d", h.Type, h.Session)
	}
	x, err := decodeFrame(h, p)
	return h, x, err
}

// header parses the header of a frame readHandshake has checked.
func (c goldenFrame) header(frame []byte) Header {
	h, _ := ParseHeader(frame)
	return h
}

// decodeFrame decodes a payload with the decoder the read loop uses for
// its type (dispatch and the on* handlers).
func decodeFrame(h Header, p []byte) (appender, error) {
	var x appender
	var err error
	switch h.Type {
	case TypeError:
		x, err = DecodeErrorPacket(p)
	case TypePing, TypePong:
		x, err = DecodePing(p)
	case TypeSessionCreate:
		x, err = decodeCreate(h, p)
	case TypeSessionCreateResponse:
		x, err = DecodeSessionCreateResponse(p)
	case TypeData:
		x, err = DecodeData(p)
	case TypeDataAck:
		x, err = DecodeDataAck(p)
	case TypeRefuse:
		x, err = DecodeRefuse(p)
	case TypeSessionClose:
		x, err = DecodeSessionClose(p)
	case TypeSessionCloseResponse:
		if len(p) != 0 {
			err = fmt.Errorf("SessionCloseResponse of %d bytes", len(p))
		}
	case TypeDeliver:
		x, err = DecodeDeliver(p)
	case TypeCredit:
		x, err = DecodeCredit(p)
	case TypeSettle:
		x, err = DecodeSettle(p)
	default:
		err = fmt.Errorf("no decoder for %s after the handshake: add it to decodeFrame", h.Type)
	}
	return x, err
}

// goldenText is the content of c's .hex file for frame.
func goldenText(c goldenFrame, frame []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s.\n", c.name, c.note)
	article := "A"
	if strings.ContainsRune("AEIOU", rune(c.typ.String()[0])) {
		article = "An"
	}
	fmt.Fprintf(&b, "# %s %s frame on session %d, flags %#02x, as %s writes it:\n", article, c.typ, c.sid, c.flags, c.via)
	if c.via == viaFinal {
		fmt.Fprintf(&b, "# the connection failed with %q.\n", c.err.Error())
	}
	if p := c.packet(); p != nil {
		fmt.Fprintf(&b, "# %T%s\n", p, describe(reflect.ValueOf(p)))
	}
	b.WriteString("# The header (type, flags, session, length), then the payload, 16 bytes a line.\n")
	b.WriteString("# Written by TestFrameGolden (golden_test.go): go test ./session/ -run TestFrameGolden -update-golden\n")
	if len(frame) < HeaderLen {
		return b.String()
	}
	fmt.Fprintf(&b, "%02x %02x %08x %08x\n", frame[0], frame[1], be.Uint32(frame[2:]), be.Uint32(frame[6:]))
	for p := frame[HeaderLen:]; len(p) > 0; {
		n := min(len(p), 16)
		fmt.Fprintf(&b, "%x\n", p[:n])
		p = p[n:]
	}
	return b.String()
}

// describe formats a packet for a comment: strings and printable bytes
// quoted, other bytes and ids in hex, pointers followed (never an address).
func describe(v reflect.Value) string {
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Struct {
		if s, ok := v.Interface().(fmt.Stringer); ok {
			return s.String()
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "nil"
		}
		return "&" + describe(v.Elem())
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				parts = append(parts, f.Name+":"+describe(v.Field(i)))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice && v.IsNil() {
				return "nil"
			}
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			if v.Kind() == reflect.Slice && len(b) > 0 && strconv.CanBackquote(string(b)) {
				return strconv.Quote(string(b))
			}
			return "0x" + hex.EncodeToString(b)
		}
		var parts []string
		for i := range v.Len() {
			parts = append(parts, describe(v.Index(i)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n := v.Uint(); n > 0xffff {
			return fmt.Sprintf("%#x", n)
		}
	}
	return fmt.Sprint(v.Interface())
}

// parseGolden returns the bytes of a .hex file.
func parseGolden(text string) ([]byte, error) {
	var digits strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, r := range line {
			if !unicode.IsSpace(r) {
				digits.WriteRune(r)
			}
		}
	}
	return hex.DecodeString(digits.String())
}

func goldenPath(name string) string { return filepath.Join(goldenDir, name+".hex") }

// TestFrameGolden encodes every frame of goldenFrames as the connection
// writes it and compares it with its golden file, then decodes the golden
// bytes as the receiving side does and compares them with the packet.
// With -update-golden it first rewrites the files (and removes the .hex
// files of cases that are gone).
func TestFrameGolden(t *testing.T) {
	cases := goldenFrames()
	if *updateGolden {
		writeGoldenFrames(t, cases)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.wire(t)
			raw, err := os.ReadFile(goldenPath(c.name))
			if err != nil {
				t.Fatalf("%v; run go test ./session/ -run TestFrameGolden -update-golden", err)
			}
			want, err := parseGolden(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", goldenPath(c.name), err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s frame changed; if on purpose, run with -update-golden and update the layout drawn in packets_*.go\n got:\n%s\nwant:\n%s",
					c.name, hex.Dump(got), hex.Dump(want))
			} else if string(raw) != goldenText(c, want) {
				t.Errorf("%s: the comments are stale; run with -update-golden", goldenPath(c.name))
			}

			// Read the golden bytes back, as the peer would.
			h, x, err := c.read(want)
			if err != nil {
				t.Fatalf("reading the golden frame: %v", err)
			}
			if wantH := (Header{Type: c.typ, Flags: c.flags, Session: c.sid, Length: uint32(len(want) - HeaderLen)}); h != wantH {
				t.Errorf("golden header %+v, want %+v", h, wantH)
			}
			if p := c.packet(); !reflect.DeepEqual(x, p) {
				t.Errorf("golden frame decodes to\n%#v\nwant\n%#v", x, p)
			}
		})
	}
}

func writeGoldenFrames(t *testing.T, cases []goldenFrame) {
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	for _, c := range cases {
		if keep[c.name] {
			t.Fatalf("two golden frames named %s", c.name)
		}
		keep[c.name] = true
		if err := os.WriteFile(goldenPath(c.name), []byte(goldenText(c, c.wire(t))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	for _, f := range old {
		if !keep[strings.TrimSuffix(filepath.Base(f), ".hex")] {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFrameGoldenComplete fails when the protocol has a frame type, or a
// flag bit a type may carry, without a golden frame, or a field that no
// golden frame of its type sets. It stays in sync by itself: the frame
// types are the constants of type Type declared in this package's source
// (so a new one fails here until goldenFrames has a case for it), checked
// against Type.Known (the typeNames table, which the read loop accepts
// types by); the flags are those of Type.allowedFlags, which the read loop
// checks flags by; the fields are the packet structs' own, by reflection.
func TestFrameGoldenComplete(t *testing.T) {
	cases := goldenFrames()
	for _, gap := range goldenGaps(frameTypeConsts(t, "."), cases) {
		t.Error(gap)
	}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.name] = true
		if _, err := os.Stat(goldenPath(c.name)); err != nil {
			t.Errorf("golden frame %s has no file: %v; run go test ./session/ -run TestFrameGolden -update-golden", c.name, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	for _, f := range files {
		if name, ok := strings.CutSuffix(filepath.Base(f), ".hex"); !ok || !names[name] {
			t.Errorf("%s is not the file of a golden frame; remove it, or run with -update-golden", f)
		}
	}
}

// TestFrameGoldenCompleteSeesNewType checks the check: a Type constant
// added to the package's source, as the next frame type would be, is a
// gap until it is named in typeNames and has a golden frame.
func TestFrameGoldenCompleteSeesNewType(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("frames.go")
	if err != nil {
		t.Fatal(err)
	}
	next := "package session\n\nconst (\n\tTypeNext Type = 0x16 // the next frame type\n\tnotAType = 99\n)\n"
	for name, b := range map[string][]byte{"frames.go": src, "next.go": []byte(next), "next_test.go": []byte("package session\n\nconst TypeTest Type = 23\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	consts := frameTypeConsts(t, dir)
	if consts[0x16] != "TypeNext" || consts[TypeHello] != "TypeHello" || consts[TypeSettle] != "TypeSettle" {
		t.Fatalf("constants read: %v", consts)
	}
	if _, ok := consts[23]; ok {
		t.Fatal("a constant of a _test.go file was read")
	}
	gaps := strings.Join(goldenGaps(consts, goldenFrames()), "\n")
	for _, want := range []string{"TypeNext = 22 is not in typeNames", "TypeNext (22) has no golden frame"} {
		if !strings.Contains(gaps, want) {
			t.Errorf("gaps do not say %q:\n%s", want, gaps)
		}
	}
}

// goldenGaps returns what the golden frames miss of the frame types
// consts (by value): a type without a frame, a flag bit a type may carry
// that none of its frames does, a packet field none of them sets; and a
// constant the read loop does not know, or the reverse.
func goldenGaps(consts map[Type]string, cases []goldenFrame) (gaps []string) {
	gap := func(format string, args ...any) { gaps = append(gaps, fmt.Sprintf(format, args...)) }
	if len(consts) == 0 {
		gap("found no constants of type Type")
	}
	for v := range 256 {
		typ := Type(v)
		name, declared := consts[typ]
		switch {
		case declared && !typ.Known():
			gap("%s = %d is not in typeNames: the read loop refuses it as unknown", name, v)
		case !declared && typ.Known():
			gap("%s (%d) is in typeNames but no Type constant has that value", typ, v)
		}
	}
	byType := map[Type][]goldenFrame{}
	names := map[string]bool{}
	for _, c := range cases {
		byType[c.typ] = append(byType[c.typ], c)
		if names[c.name] {
			gap("two golden frames named %s", c.name)
		}
		names[c.name] = true
		if k := kebab(c.typ.String()); c.name != k && !strings.HasPrefix(c.name, k+"-") {
			gap("golden frame %s of type %s: its name must start with %s", c.name, c.typ, k)
		}
	}
	types := slices.Sorted(maps.Keys(consts))
	for _, typ := range types {
		cs := byType[typ]
		if len(cs) == 0 {
			gap("%s (%d) has no golden frame: add one to goldenFrames in golden_test.go and run with -update-golden", consts[typ], typ)
			continue
		}
		for bit := uint8(1); bit != 0; bit <<= 1 {
			if typ.allowedFlags()&bit != 0 && !slices.ContainsFunc(cs, func(c goldenFrame) bool { return c.flags&bit != 0 }) {
				gap("%s may carry flag %#02x, but no golden frame of it does", typ, bit)
			}
		}
		set := map[string]bool{}
		var all []string
		for _, c := range cs {
			if p := c.packet(); p != nil {
				nonZeroFields(reflect.ValueOf(p), "", set)
				all = fieldNames(reflect.TypeOf(p), "", all[:0])
			}
		}
		for _, f := range all {
			if !set[f] {
				gap("no golden frame of %s sets %s: every field must be non-zero in one of them", typ, f)
			}
		}
	}
	return gaps
}

// frameTypeConsts returns the constants of type Type declared in the
// non-test Go files of dir, by value. Their values must be integer
// literals, as the wire format wants them spelled out.
func frameTypeConsts(t *testing.T, dir string) map[Type]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[Type]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			var typ ast.Expr // carried to the specs that repeat the one before (iota)
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil || len(vs.Values) > 0 {
					typ = vs.Type
				}
				if id, ok := typ.(*ast.Ident); !ok || id.Name != "Type" {
					continue
				}
				for i, n := range vs.Names {
					if n.Name == "_" {
						continue
					}
					var lit *ast.BasicLit
					if i < len(vs.Values) {
						lit, _ = vs.Values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.INT {
						t.Fatalf("%s: the value of %s is not an integer literal; teach frameTypeConsts to read it", fset.Position(n.Pos()), n.Name)
					}
					v, err := strconv.ParseUint(lit.Value, 0, 8)
					if err != nil {
						t.Fatalf("%s: %s: %v", fset.Position(n.Pos()), n.Name, err)
					}
					if prev, dup := consts[Type(v)]; dup {
						t.Errorf("%s and %s are both %d", prev, n.Name, v)
					}
					consts[Type(v)] = n.Name
				}
			}
		}
	}
	return consts
}

// nonZeroFields adds to set the exported fields of struct v (through
// pointers, as Topic.Name) that are not zero; an empty slice is zero.
func nonZeroFields(v reflect.Value, prefix string, set map[string]bool) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		f := v.Field(i)
		if f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
			continue
		}
		set[prefix+sf.Name] = true
		if f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct {
			nonZeroFields(f.Elem(), prefix+sf.Name+".", set)
		}
	}
}

// fieldNames appends the names nonZeroFields uses for every exported field
// of struct type typ.
func fieldNames(typ reflect.Type, prefix string, dst []string) []string {
	for i := range typ.NumField() {
		sf := typ.Field(i)
		if !sf.IsExported() {
			continue
		}
		dst = append(dst, prefix+sf.Name)
		if sf.Type.Kind() == reflect.Pointer && sf.Type.Elem().Kind() == reflect.Struct {
			dst = fieldNames(sf.Type.Elem(), prefix+sf.Name+".", dst)
		}
	}
	return dst
}

// kebab turns SessionCreateResponse into session-create-response, AuthOK
// into auth-ok.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 && unicode.IsLower(rune(s[i-1])) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// wireConn is a net.Conn that reads from r and keeps what is written. It
// records the longest buffer Read was given and the bytes read, for the
// bounds FuzzPreAuth checks.
type wireConn struct {
	r       io.Reader
	w       bytes.Buffer
	maxRead int // the longest buffer passed to Read
	read    int // bytes read
}

func (c *wireConn) Read(p []byte) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *wireConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// rest returns an error if input is left unread.
func (c *wireConn) rest() error {
	if n, _ := io.Copy(io.Discard, c.r); n > 0 {
		return fmt.Errorf("%d bytes left after the frame", n)
	}
	return nil
}

func (c *wireConn) Close() error                     { return nil }
func (c *wireConn) LocalAddr() net.Addr              { return wireAddr }
func (c *wireConn) RemoteAddr() net.Addr             { return wireAddr }
func (c *wireConn) SetDeadline(time.Time) error      { return nil }
func (c *wireConn) SetReadDeadline(time.Time) error  { return nil }
func (c *wireConn) SetWriteDeadline(time.Time) error { return nil }

var wireAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7400}

package session

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// packetCase is one packet with its decoder, for the table tests and the
// fuzz seeds.
type packetCase struct {
	name   string
	pkt    appender
	decode func([]byte) (appender, error)
	// rest is true for Data, whose last field runs to the end of the
	// payload: any longer prefix of it decodes, and so does a trailing byte.
	rest bool
}

func dec[P appender](f func([]byte) (P, error)) func([]byte) (appender, error) {
	return func(p []byte) (appender, error) {
		x, err := f(p)
		if err != nil {
			return nil, err
		}
		return x, nil
	}
}

var (
	idA   = message.NodeID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	nonce = [32]byte{0: 0xaa, 31: 0x55}
)

func packetCases() []packetCase {
	hello := dec(DecodeHello)
	auth := dec(DecodeAuth)
	authOK := dec(DecodeAuthOK)
	errp := dec(DecodeErrorPacket)
	create := dec(DecodeSessionCreate)
	topicCreate := dec(DecodeTopicSessionCreate)
	resp := dec(DecodeSessionCreateResponse)
	data := dec(DecodeData)
	ack := dec(DecodeDataAck)
	refuse := dec(DecodeRefuse)
	closep := dec(DecodeSessionClose)
	ping := dec(DecodePing)
	deliver := dec(DecodeDeliver)
	credit := dec(DecodeCredit)
	settle := dec(DecodeSettle)
	return []packetCase{
		{name: "Hello", pkt: Hello{MinVersion: 1, MaxVersion: 3, Nonce: nonce, Name: "hub-1", ID: idA}, decode: hello},
		{name: "Hello/empty", pkt: Hello{}, decode: hello},
		{name: "Auth", pkt: Auth{Version: 1, Name: "plant-7", ID: idA, Nonce: nonce, MAC: bytes.Repeat([]byte{7}, 32)}, decode: auth},
		{name: "Auth/no-mac", pkt: Auth{Version: 1, Name: "plant-7", ID: idA, Nonce: nonce}, decode: auth},
		{name: "AuthOK", pkt: AuthOK{MAC: bytes.Repeat([]byte{9}, 32)}, decode: authOK},
		{name: "AuthOK/no-mac", pkt: AuthOK{}, decode: authOK},
		{name: "Error", pkt: ErrorPacket{Code: CodeAuth, Reason: "authentication failed: wrong MAC"}, decode: errp},
		{name: "Error/empty", pkt: ErrorPacket{}, decode: errp},
		{name: "SessionCreate", pkt: SessionCreate{Versions: []uint16{2, 1}, Name: "plant-7", ID: idA, Address: "orders@hub-1", Window: 1000}, decode: create},
		{name: "SessionCreate/no-versions", pkt: SessionCreate{Name: "x", Window: 1}, decode: create},
		{name: "TopicSessionCreate", pkt: SessionCreate{Versions: []uint16{2}, Name: "plant-7", ID: idA, Address: "orders.#", Window: 64, Topic: &TopicSubscription{Name: "audit", Durable: true}}, decode: topicCreate},
		{name: "TopicSessionCreate/private", pkt: SessionCreate{Name: "x", Address: "orders.*.created", Window: 1, Topic: &TopicSubscription{}}, decode: topicCreate},
		{name: "SessionCreateResponse", pkt: SessionCreateResponse{Version: 1, Name: "hub-1", ID: idA, Window: 500}, decode: resp},
		{name: "SessionCreateResponse/refused", pkt: SessionCreateResponse{Reason: "unknown address", Name: "hub-1", ID: idA}, decode: resp},
		{name: "Data", pkt: Data{Seq: 42, Message: []byte("an encoded message")}, decode: data, rest: true},
		{name: "DataAck", pkt: DataAck{Seq: 1<<64 - 1}, decode: ack},
		{name: "Refuse", pkt: Refuse{Seq: 7, Reason: "destination unknown"}, decode: refuse},
		{name: "SessionClose", pkt: SessionClose{Reason: "shutting down"}, decode: closep},
		{name: "SessionClose/empty", pkt: SessionClose{}, decode: closep},
		{name: "Ping", pkt: Ping{Nonce: 0x0102030405060708}, decode: ping},
		{name: "Deliver", pkt: Deliver{Tag: 9, Attempt: 2, Reason: "delivered 10 times", Message: []byte("an encoded message")}, decode: deliver, rest: true},
		{name: "Deliver/no-reason", pkt: Deliver{Tag: 1, Attempt: 1, Message: []byte("m")}, decode: deliver, rest: true},
		{name: "Credit", pkt: Credit{N: 512}, decode: credit},
		{name: "Settle", pkt: Settle{Op: SettleAck, Tags: []uint64{1, 2, 1<<64 - 1}}, decode: settle},
		{name: "Settle/nack", pkt: Settle{Op: SettleNack, Tags: []uint64{7}, Reason: "handler failed"}, decode: settle},
	}
}

func TestPacketRoundTrip(t *testing.T) {
	for _, tc := range packetCases() {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.pkt.AppendBinary(nil)
			got, err := tc.decode(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.pkt) {
				t.Fatalf("decoded %+v, want %+v", got, tc.pkt)
			}
			if again := got.AppendBinary([]byte("prefix")); !bytes.Equal(again[6:], enc) || string(again[:6]) != "prefix" {
				t.Fatalf("re-encoding differs:\n got  %x\n want %x", again[6:], enc)
			}
		})
	}
}

func TestPacketTruncated(t *testing.T) {
	for _, tc := range packetCases() {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.pkt.AppendBinary(nil)
			for i := range len(enc) {
				if tc.rest && i >= 8 {
					break // a shorter message is still a message
				}
				if _, err := tc.decode(enc[:i]); !errors.Is(err, ErrMalformed) {
					t.Fatalf("decode of the first %d of %d bytes: err %v, want ErrMalformed", i, len(enc), err)
				}
			}
		})
	}
}

func TestPacketTrailingBytes(t *testing.T) {
	for _, tc := range packetCases() {
		if tc.rest {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			enc := append(tc.pkt.AppendBinary(nil), 0)
			_, err := tc.decode(enc)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "trailing") {
				t.Fatalf("decode with a trailing byte: err %v, want trailing bytes: ErrMalformed", err)
			}
		})
	}
}

func TestDecodeDataDoesNotCopy(t *testing.T) {
	enc := Data{Seq: 3, Message: []byte("abc")}.AppendBinary(nil)
	d, err := DecodeData(enc)
	if err != nil {
		t.Fatal(err)
	}
	if &d.Message[0] != &enc[8] {
		t.Fatal("DecodeData copied the message")
	}
	if cap(d.Message) != len(d.Message) {
		t.Fatalf("message capacity %d beyond its length %d: an append could overwrite the input", cap(d.Message), len(d.Message))
	}
	empty, err := DecodeData(enc[:8])
	if err != nil || empty.Seq != 3 || len(empty.Message) != 0 {
		t.Fatalf("Data with an empty message: %+v, %v", empty, err)
	}
}

func TestDecodersDoNotRetainInput(t *testing.T) {
	enc := Auth{Version: 1, Name: "plant-7", MAC: []byte{1, 2, 3}}.AppendBinary(nil)
	a, err := DecodeAuth(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 0xff
	}
	if a.Name != "plant-7" || !bytes.Equal(a.MAC, []byte{1, 2, 3}) {
		t.Fatalf("decoded Auth changed with its input: %+v", a)
	}
}

func TestLongStringsAreCut(t *testing.T) {
	long := strings.Repeat("x", maxStr16+10)
	got, err := DecodeErrorPacket(ErrorPacket{Code: 1, Reason: long}.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != long[:maxStr16] {
		t.Fatalf("reason of %d bytes, want %d", len(got.Reason), maxStr16)
	}
	vs := make([]uint16, 300)
	sc, err := DecodeSessionCreate(SessionCreate{Versions: vs}.AppendBinary(nil))
	if err != nil || len(sc.Versions) != maxList8 {
		t.Fatalf("versions: %d, %v; want %d", len(sc.Versions), err, maxList8)
	}
}

func TestControlMaxFrameHoldsLargestPacket(t *testing.T) {
	s := strings.Repeat("a", maxStr16)
	p := SessionCreate{Versions: make([]uint16, maxList8), Name: s, Address: s, Topic: &TopicSubscription{Name: s, Durable: true}}.AppendBinary(nil)
	if len(p) != controlMaxFrame {
		t.Fatalf("largest SessionCreate is %d bytes, controlMaxFrame %d", len(p), controlMaxFrame)
	}
}

// TestTopicSessionCreateLayout pins the bytes of the topic extension, so
// that a change of the layout drawn in SessionCreate's comment fails here.
func TestTopicSessionCreateLayout(t *testing.T) {
	base := SessionCreate{Name: "c", Address: "a.#", Window: 1}
	enc := base.AppendBinary(nil)
	base.Topic = &TopicSubscription{Name: "s1", Durable: true}
	got := base.AppendBinary(nil)
	want := append(append([]byte{}, enc...), 0x00, 0x02, 's', '1', 0x01)
	if !bytes.Equal(got, want) {
		t.Fatalf("topic SessionCreate:\n got  %x\n want %x", got, want)
	}
	if _, err := DecodeSessionCreate(got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeSessionCreate of a topic payload: %v, want ErrMalformed", err)
	}
	got[len(got)-1] = 0x03
	if _, err := DecodeTopicSessionCreate(got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown option bits: %v, want ErrMalformed", err)
	}
}

package message_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// FuzzDecode feeds Decode arbitrary bytes. Decode must never panic, and
// whatever it accepts must be canonical: re-encoding gives back the input
// bytes, and decoding those gives an equal message. Decoding under tight
// limits must either fail or agree.
//
// Seeds come from the sample messages and from testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, m := range samples() {
		f.Add(mustEncode(f, m))
	}
	f.Add(mustEncode(f, oneK()))
	for _, in := range hugeLengths() {
		f.Add(in)
	}
	tight := message.Limits{MaxBody: 8, MaxProperties: 2, MaxPropertyBytes: 8, MaxHeaderString: 8}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := message.Decode(data, message.Limits{})
		h, perr := message.Peek(data, message.Limits{})
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a message with error %v", err)
			}
			if perr == nil {
				t.Fatalf("Peek accepted what Decode refused (%v)", err)
			}
			return
		}
		if _, _, derr := message.ParseDestination(m.Destination); (derr == nil) != (perr == nil) {
			t.Fatalf("Peek error %v, destination check %v", perr, derr)
		}
		if perr == nil && (h.ID != m.ID || h.Origin != m.Origin || h.Destination != m.Destination || h.Priority != m.Priority || h.TTL != m.TTL || h.Kind != m.Kind) {
			t.Fatalf("Peek header %+v differs from Decode %+v", h, m)
		}
		// PeekValid accepts exactly what Peek accepts and Validate
		// accepts: a node stores nothing its own Producer would refuse.
		_, verr := message.PeekValid(data, message.Limits{})
		if want := perr == nil && m.Validate(message.Limits{}) == nil; (verr == nil) != want {
			t.Fatalf("PeekValid error %v; Peek error %v, Validate error %v", verr, perr, m.Validate(message.Limits{}))
		}
		_ = m.Clone()
		enc, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if !bytes.Equal(enc, data) {
			t.Fatalf("encoding is not canonical:\n in  %x\n out %x", data, enc)
		}
		if n := m.EncodedSize(); n != len(enc) {
			t.Fatalf("EncodedSize %d, encoding %d bytes", n, len(enc))
		}
		again, err := message.Decode(enc, message.Limits{})
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("decode→encode→decode differs:\n first %+v\n again %+v", m, again)
		}
		if small, err := message.Decode(data, tight); err == nil && !reflect.DeepEqual(small, m) {
			t.Fatalf("decode under tight limits differs")
		}
	})
}

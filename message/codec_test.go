package message_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func TestRoundTrip(t *testing.T) {
	for name, m := range samples() {
		t.Run(name, func(t *testing.T) {
			enc := mustEncode(t, m)
			if got := m.EncodedSize(); got != len(enc) {
				t.Errorf("EncodedSize = %d, encoding has %d bytes", got, len(enc))
			}
			got, err := message.Decode(enc, message.Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip differs\n got %+v\nwant %+v", got, m)
			}
			again := mustEncode(t, got)
			if !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, enc)
			}
			var u message.Message
			if err := u.UnmarshalBinary(enc); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if !reflect.DeepEqual(&u, m) {
				t.Fatalf("UnmarshalBinary differs\n got %+v\nwant %+v", &u, m)
			}
		})
	}
}

func TestRoundTripPropertyTypes(t *testing.T) {
	for _, p := range allTypes() {
		t.Run(p.Key, func(t *testing.T) {
			m := &message.Message{Kind: message.KindData, Destination: "d", Properties: message.Properties{p}}
			got, err := message.Decode(mustEncode(t, m), message.Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			v, ok := got.Properties.Get(p.Key)
			if !ok {
				t.Fatalf("property %q lost", p.Key)
			}
			if v != p.Value || v.Type() != p.Value.Type() {
				t.Fatalf("got %s %v, want %s %v", v.Type(), v, p.Value.Type(), p.Value)
			}
			if !reflect.DeepEqual(v.Any(), p.Value.Any()) {
				t.Fatalf("Any() = %#v, want %#v", v.Any(), p.Value.Any())
			}
		})
	}
}

func TestRoundTripNaNPayload(t *testing.T) {
	nan32 := math.Float32frombits(0x7fc0_1234)
	nan64 := math.Float64frombits(0x7ff8_0000_dead_beef)
	m := &message.Message{Kind: message.KindData, Destination: "d", Properties: message.Properties{
		{"f32", message.Float32(nan32)}, {"f64", message.Float64(nan64)},
	}}
	got, err := message.Decode(mustEncode(t, m), message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("NaN values differ: got %v", got.Properties)
	}
	v, _ := got.Properties.Get("f32")
	if bits := math.Float32bits(v.Float32()); bits != 0x7fc0_1234 {
		t.Errorf("float32 NaN bits = %#x", bits)
	}
	v, _ = got.Properties.Get("f64")
	if bits := math.Float64bits(v.Float64()); bits != 0x7ff8_0000_dead_beef {
		t.Errorf("float64 NaN bits = %#x", bits)
	}
}

func TestEmptyBytesAndNilBytesAreOneValue(t *testing.T) {
	if message.Bytes(nil) != message.Bytes([]byte{}) {
		t.Fatal("Bytes(nil) != Bytes([]byte{})")
	}
	m := &message.Message{Kind: message.KindData, Destination: "d", Properties: message.Properties{
		{"empty", message.Bytes([]byte{})},
	}, Body: []byte{}}
	got, err := message.Decode(mustEncode(t, m), message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Body != nil {
		t.Errorf("empty body decoded as %#v, want nil", got.Body)
	}
	if v, _ := got.Properties.Get("empty"); v != message.Bytes(nil) || v.BytesVal() != nil {
		t.Errorf("empty bytes decoded as %#v", v)
	}
}

func TestEmptyPropertiesDecodeNil(t *testing.T) {
	m := &message.Message{Kind: message.KindData, Destination: "d", Properties: message.Properties{}}
	got, err := message.Decode(mustEncode(t, m), message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties != nil {
		t.Fatalf("Properties = %#v, want nil", got.Properties)
	}
}

// Only the kind properties of m.Kind travel.
func TestOtherKindPropertiesAreNotEncoded(t *testing.T) {
	m := &message.Message{
		Kind: message.KindData, Destination: "d",
		Data:    message.DataProps{DataType: "t"},
		Command: message.CommandProps{Command: "c"},
		File:    message.FileProps{Filename: "f", Filesize: 9},
	}
	got, err := message.Decode(mustEncode(t, m), message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &message.Message{Kind: message.KindData, Destination: "d", Data: message.DataProps{DataType: "t"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestTimestampNormalisedToUTC(t *testing.T) {
	zone := time.FixedZone("plant", 5*3600)
	for name, in := range map[string]time.Time{
		"zone": time.Date(2025, 1, 2, 3, 4, 5, 6, zone),
		"now":  time.Now(), // carries a monotonic reading
	} {
		t.Run(name, func(t *testing.T) {
			m := &message.Message{Kind: message.KindData, Destination: "d", Timestamp: in}
			got, err := message.Decode(mustEncode(t, m), message.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Timestamp.Equal(in) || got.Timestamp.Location() != time.UTC {
				t.Fatalf("timestamp %v, want %v in UTC", got.Timestamp, in)
			}
		})
	}
}

func TestAppendBinaryKeepsPrefix(t *testing.T) {
	m := samples()["command.full"]
	want := mustEncode(t, m)
	got, err := m.AppendBinary([]byte("prefix"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[6:], want) {
		t.Fatalf("AppendBinary = %x", got)
	}
}

func TestAppendBinaryRefusesUnencodable(t *testing.T) {
	long := strings.Repeat("x", 1<<16)
	cases := map[string]struct {
		m    message.Message
		want error
	}{
		"kind zero":       {message.Message{Destination: "d"}, message.ErrKind},
		"kind 4":          {message.Message{Kind: 4, Destination: "d"}, message.ErrKind},
		"priority 10":     {message.Message{Kind: message.KindData, Priority: 10}, message.ErrPriority},
		"destination 64K": {message.Message{Kind: message.KindData, Destination: long}, message.ErrHeaderTooLarge},
		"filename 64K": {message.Message{Kind: message.KindFile, Destination: "d",
			File: message.FileProps{Filename: long}}, message.ErrHeaderTooLarge},
		"key 64K": {message.Message{Kind: message.KindData, Destination: "d",
			Properties: message.Properties{{long, message.Bool(true)}}}, message.ErrPropertyTooLarge},
		"zero value": {message.Message{Kind: message.KindData, Destination: "d",
			Properties: message.Properties{{"k", message.Value{}}}}, message.ErrPropertyType},
		"duplicate key": {message.Message{Kind: message.KindData, Destination: "d",
			Properties: message.Properties{{"k", message.Bool(true)}, {"k", message.Bool(false)}}}, message.ErrDuplicateProperty},
		"65536 properties": {message.Message{Kind: message.KindData, Destination: "d",
			Properties: make(message.Properties, 1<<16)}, message.ErrTooManyProperties},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := c.m.AppendBinary([]byte("keep"))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if string(got) != "keep" {
				t.Fatalf("dst changed to %q", got)
			}
		})
	}
	t.Run("timestamp year 3000", func(t *testing.T) {
		m := message.Message{Kind: message.KindData, Destination: "d", Timestamp: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}
		if _, err := m.MarshalBinary(); err == nil {
			t.Fatal("no error for a timestamp UnixNano cannot hold")
		}
	})
}

// Duplicate keys past the small-set size are found through the map.
func TestAppendBinaryDuplicateKeyAmongMany(t *testing.T) {
	m := &message.Message{Kind: message.KindData, Destination: "d"}
	for i := range 40 {
		m.Properties = append(m.Properties, message.Property{Key: string(rune('A' + i)), Value: message.Byte(1)})
	}
	m.Properties = append(m.Properties, message.Property{Key: "B", Value: message.Byte(2)})
	if _, err := m.MarshalBinary(); !errors.Is(err, message.ErrDuplicateProperty) {
		t.Fatalf("err = %v, want ErrDuplicateProperty", err)
	}
}

func TestClone(t *testing.T) {
	m := samples()["data.props"]
	c := m.Clone()
	if !reflect.DeepEqual(c, m) {
		t.Fatal("clone differs")
	}
	c.Body[0] = '!'
	c.Properties[0].Value = message.Bool(false)
	c.Properties.Set("new", message.Byte(1))
	if m.Body[0] == '!' || !m.Properties[0].Value.Bool() {
		t.Fatal("changing the clone changed the original")
	}
	if _, ok := m.Properties.Get("new"); ok {
		t.Fatal("Set on the clone added to the original")
	}
	if nilClone := (&message.Message{}).Clone(); nilClone.Body != nil || nilClone.Properties != nil {
		t.Fatal("clone of nil slices is not nil")
	}
}

// A clone with few properties holds them in its own allocation: setting
// one, or appending, never shows in the original; nor in what CopyTo
// made.
func TestCloneFewProperties(t *testing.T) {
	for n := 1; n <= 6; n++ {
		m := &message.Message{Kind: message.KindData, Destination: "d", Body: []byte("b")}
		for i := range n {
			m.Properties.Set(string(rune('a'+i)), message.Int32(int32(i)))
		}
		var to message.Message
		m.CopyTo(&to)
		for _, c := range []*message.Message{m.Clone(), &to} {
			if !reflect.DeepEqual(c, m) {
				t.Fatalf("%d properties: copy differs", n)
			}
			c.Properties.Set("a", message.Int32(-1))
			c.Properties.Set("new", message.Int32(-2))
			c.Body[0] = 'X'
			if v, _ := m.Properties.Get("a"); v.Int32() != 0 || len(m.Properties) != n || string(m.Body) != "b" {
				t.Fatalf("%d properties: changing the copy changed the original: %v %q", n, m.Properties, m.Body)
			}
		}
	}
}

// Decoded byte slices are capped, so appending to the body cannot write
// into memory that strings of the message are carved from.
func TestDecodedBodyIsIndependent(t *testing.T) {
	enc := mustEncode(t, samples()["data.props"])
	m, err := message.Decode(enc, message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 0 // Decode must not retain its input
	}
	m.Body = append(m.Body, bytes.Repeat([]byte("z"), 64)...)
	want := samples()["data.props"]
	want.Body = m.Body
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("message changed after its input was cleared or its body grown:\n%+v", m)
	}
}

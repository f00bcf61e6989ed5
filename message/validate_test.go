package message_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func TestValidate(t *testing.T) {
	// valid returns a fresh message that passes; each case breaks one thing.
	valid := func() *message.Message {
		m := samples()["command.full"]
		m.Properties = message.Properties{{"a", message.Int32(1)}, {"b", message.String("xy")}}
		return m
	}
	small := message.Limits{MaxBody: 4, MaxProperties: 2, MaxPropertyBytes: 5, MaxHeaderString: 16}
	errAny := errors.New("any error without a sentinel")
	cases := []struct {
		name   string
		change func(m *message.Message)
		lim    message.Limits
		want   error
	}{
		{"valid", func(m *message.Message) {}, message.Limits{}, nil},
		{"valid at the limits", func(m *message.Message) { m.Body = []byte("1234") }, small, nil},
		{"every kind valid: data", func(m *message.Message) { m.Kind = message.KindData }, message.Limits{}, nil},
		{"every kind valid: file", func(m *message.Message) { m.Kind = message.KindFile }, message.Limits{}, nil},
		{"kind 0", func(m *message.Message) { m.Kind = 0 }, message.Limits{}, message.ErrKind},
		{"kind 4", func(m *message.Message) { m.Kind = 4 }, message.Limits{}, message.ErrKind},
		{"priority 10", func(m *message.Message) { m.Priority = 10 }, message.Limits{}, message.ErrPriority},
		{"destination empty", func(m *message.Message) { m.Destination = "" }, message.Limits{}, message.ErrDestination},
		{"destination syntax", func(m *message.Message) { m.Destination = "a@b@c" }, message.Limits{}, message.ErrDestination},
		{"destination limit", func(m *message.Message) { m.Destination = strings.Repeat("d", 17) }, small, message.ErrHeaderTooLarge},
		{"command limit", func(m *message.Message) { m.Command.Command = strings.Repeat("c", 17) }, small, message.ErrHeaderTooLarge},
		{"replyTo limit", func(m *message.Message) { m.Command.ReplyTo = strings.Repeat("r", 4097) }, message.Limits{}, message.ErrHeaderTooLarge},
		{"dataType limit", func(m *message.Message) {
			m.Kind, m.Data.DataType = message.KindData, strings.Repeat("t", 17)
		}, small, message.ErrHeaderTooLarge},
		{"filename limit", func(m *message.Message) {
			m.Kind, m.File.Filename = message.KindFile, strings.Repeat("f", 17)
		}, small, message.ErrHeaderTooLarge},
		{"other kind is not checked", func(m *message.Message) { m.File.Filename = strings.Repeat("f", 17) }, small, nil},
		{"too many properties", func(m *message.Message) { m.Properties.Set("c", message.Bool(true)) }, small, message.ErrTooManyProperties},
		{"property too large", func(m *message.Message) { m.Properties.Set("b", message.String("xyzwv")) }, small, message.ErrPropertyTooLarge},
		{"property int64 too large", func(m *message.Message) { m.Properties.Set("a", message.Int64(1)) }, small, message.ErrPropertyTooLarge},
		{"property zero value", func(m *message.Message) { m.Properties[0].Value = message.Value{} }, message.Limits{}, message.ErrPropertyType},
		{"duplicate property", func(m *message.Message) { m.Properties[1].Key = "a" }, message.Limits{}, message.ErrDuplicateProperty},
		{"body too large", func(m *message.Message) { m.Body = []byte("12345") }, small, message.ErrBodyTooLarge},
		{"body default limit", func(m *message.Message) { m.Body = make([]byte, 8<<20+1) }, message.Limits{}, message.ErrBodyTooLarge},
		{"empty key", func(m *message.Message) { m.Properties[0].Key = "" }, message.Limits{}, errAny},
		{"key not UTF-8", func(m *message.Message) { m.Properties[0].Key = "\xff" }, message.Limits{}, errAny},
		{"negative ttl", func(m *message.Message) { m.TTL = -time.Nanosecond }, message.Limits{}, errAny},
		{"timestamp year 3000", func(m *message.Message) {
			m.Timestamp = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
		}, message.Limits{}, errAny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := valid()
			c.change(m)
			err := m.Validate(c.lim)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case c.want == errAny && err == nil:
				t.Fatal("Validate = nil, want an error")
			case c.want != nil && c.want != errAny && !errors.Is(err, c.want):
				t.Fatalf("Validate = %v, want %v", err, c.want)
			}
			if err == nil {
				// Whatever passes Validate encodes, and decodes under the same limits.
				enc, err := m.MarshalBinary()
				if err != nil {
					t.Fatalf("valid message does not encode: %v", err)
				}
				if _, err := message.Decode(enc, c.lim); err != nil {
					t.Fatalf("valid message does not decode: %v", err)
				}
			}
		})
	}
}

// Limits too large for the wire are lowered to it, so Validate never passes
// what AppendBinary refuses.
func TestValidateClampsLimitsToTheWire(t *testing.T) {
	huge := message.Limits{MaxHeaderString: 1 << 40, MaxPropertyBytes: 1 << 40}
	m := &message.Message{Kind: message.KindData, Destination: "d",
		Data: message.DataProps{DataType: strings.Repeat("t", 1<<16)}}
	if err := m.Validate(huge); !errors.Is(err, message.ErrHeaderTooLarge) {
		t.Fatalf("Validate = %v, want ErrHeaderTooLarge", err)
	}
	m.Data.DataType = ""
	m.Properties = message.Properties{{strings.Repeat("k", 1<<16), message.Bool(true)}}
	if err := m.Validate(huge); !errors.Is(err, message.ErrPropertyTooLarge) {
		t.Fatalf("Validate = %v, want ErrPropertyTooLarge", err)
	}
}

func TestDefaultLimits(t *testing.T) {
	want := message.Limits{MaxBody: 8 << 20, MaxProperties: 64, MaxPropertyBytes: 64 << 10, MaxHeaderString: 4096}
	if got := message.DefaultLimits(); got != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", got, want)
	}
}

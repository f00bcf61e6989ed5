package message_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// origin is a fixed node id so that encodings are reproducible.
var origin = message.NodeID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}

// ts is a fixed creation time in UTC, as Decode returns it.
var ts = time.Date(2025, 11, 29, 13, 10, 42, 123456789, time.UTC)

// allTypes holds one property of every type, at edge values. Floats are
// NaN-free here so that the values also compare equal as Go numbers; NaN
// has its own test.
func allTypes() message.Properties {
	return message.Properties{
		{"bool.true", message.Bool(true)},
		{"bool.false", message.Bool(false)},
		{"byte.0", message.Byte(0)},
		{"byte.255", message.Byte(255)},
		{"bytes.nil", message.Bytes(nil)},
		{"bytes.binary", message.Bytes([]byte{0, 1, 0xfe, 0xff})},
		{"int16.min", message.Int16(math.MinInt16)},
		{"int16.max", message.Int16(math.MaxInt16)},
		{"int32.min", message.Int32(math.MinInt32)},
		{"int32.max", message.Int32(math.MaxInt32)},
		{"int64.min", message.Int64(math.MinInt64)},
		{"int64.max", message.Int64(math.MaxInt64)},
		{"int64.-1", message.Int64(-1)},
		{"float32.-0", message.Float32(float32(math.Copysign(0, -1)))},
		{"float32.tiny", message.Float32(math.SmallestNonzeroFloat32)},
		{"float32.max", message.Float32(math.MaxFloat32)},
		{"float32.-inf", message.Float32(float32(math.Inf(-1)))},
		{"float64.-0", message.Float64(math.Copysign(0, -1))},
		{"float64.tiny", message.Float64(math.SmallestNonzeroFloat64)},
		{"float64.max", message.Float64(math.MaxFloat64)},
		{"float64.+inf", message.Float64(math.Inf(1))},
		{"string.empty", message.String("")},
		{"string.utf8", message.String("héllo, 世界 \x00 end")},
		{"", message.String("empty key is encodable, though Validate refuses it")},
	}
}

// samples are valid messages covering every kind, every property type and
// the timestamp edge cases.
func samples() map[string]*message.Message {
	return map[string]*message.Message{
		"command.minimal": {Kind: message.KindCommand, Destination: "ctl"},
		"command.full": {
			ID: 1 << 60, Origin: origin, Destination: "ctl@plant-7", Kind: message.KindCommand,
			Priority: 9, TTL: 90 * time.Second, Timestamp: ts,
			Command:    message.CommandProps{Command: "restart", ReplyTo: "replies@hub-1", CorrelationID: "c-42"},
			Properties: message.Properties{{"attempt", message.Int32(3)}},
			Body:       []byte("now"),
		},
		"data.props": {
			ID: 7, Origin: origin, Destination: "orders@plant-7", Kind: message.KindData,
			Priority: message.DefaultPriority, Timestamp: ts,
			Data:       message.DataProps{DataType: "order", Encoding: "json"},
			Properties: allTypes(),
			Body:       []byte(`{"id":1}`),
		},
		"file.full": {
			ID: math.MaxUint64, Origin: origin, Destination: "inbox@plant-7", Kind: message.KindFile,
			Priority: 0, TTL: math.MaxInt64, Timestamp: ts,
			File: message.FileProps{
				SrcIdentifier: "plant-1", CenterIdentifier: "hub-1", DestIdentifier: "plant-7",
				Filename: "report.pdf", Filesize: 1 << 40,
				FileChecksum: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
				SendFilePath: "/var/outbox/report.pdf", ReceivedFilePath: "",
			},
		},
		"file.empty":   {Kind: message.KindFile, Destination: "f", File: message.FileProps{Filesize: -1}},
		"time.epoch":   {Kind: message.KindData, Destination: "t", Timestamp: time.Unix(0, 0).UTC()},
		"time.pre1970": {Kind: message.KindData, Destination: "t", Timestamp: time.Unix(-1, 5).UTC()},
		"time.min":     {Kind: message.KindData, Destination: "t", Timestamp: time.Unix(0, math.MinInt64).UTC()},
		"time.max":     {Kind: message.KindData, Destination: "t", Timestamp: time.Unix(0, math.MaxInt64).UTC()},
		"body.binary":  {Kind: message.KindData, Destination: "b", Body: bytes.Repeat([]byte{0, 0xff}, 300)},
		"ttl.negative": {Kind: message.KindData, Destination: "n", TTL: -time.Second},
		"dest.invalid": {Kind: message.KindData, Destination: "not a destination@@"},
		"priority.max": {Kind: message.KindData, Destination: "p", Priority: message.MaxPriority},
	}
}

// oneK is the benchmark message: a data message with a 1 KiB body and four
// properties, about what a typical telemetry or order message carries.
func oneK() *message.Message {
	m := &message.Message{
		ID: 1<<60 | 12345, Origin: origin, Destination: "orders@plant-7", Kind: message.KindData,
		Priority: message.DefaultPriority, TTL: time.Hour, Timestamp: ts,
		Data: message.DataProps{DataType: "order", Encoding: "json"},
		Body: bytes.Repeat([]byte("x"), 1024),
	}
	m.Properties.Set("customer", message.String("ACME-0042"))
	m.Properties.Set("lines", message.Int32(12))
	m.Properties.Set("total", message.Float64(1234.5))
	m.Properties.Set("urgent", message.Bool(true))
	return m
}

func mustEncode(t testing.TB, m *message.Message) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

// raw builds encodings by hand, for inputs the encoder refuses to make.
type raw []byte

// header appends a fixed header with the given kind, priority, flags and
// timestamp field.
func (r raw) header(kind, prio, flags byte, ts int64) raw {
	r = append(r.clip(), message.CodecVersion, kind, prio, flags)
	r = binary.BigEndian.AppendUint64(r, 1)
	r = append(r, origin[:]...)
	r = binary.BigEndian.AppendUint64(r, 0)
	return binary.BigEndian.AppendUint64(r, uint64(ts))
}

func (r raw) u8(v byte) raw      { return append(r.clip(), v) }
func (r raw) u16(v uint16) raw   { return binary.BigEndian.AppendUint16(r.clip(), v) }
func (r raw) u32(v uint32) raw   { return binary.BigEndian.AppendUint32(r.clip(), v) }
func (r raw) str16(s string) raw { return append(r.u16(uint16(len(s))), s...) }

// data appends what follows the header of a data message: destination "d"
// and empty data properties.
func (r raw) data() raw { return r.str16("d").str16("").str16("") }

// prop appends a property with a raw value.
func (r raw) prop(key string, typ byte, value ...byte) raw {
	return append(r.str16(key).u8(typ), value...)
}

// clip makes the next append copy, so that one prefix can start many inputs.
func (r raw) clip() raw { return r[:len(r):len(r)] }

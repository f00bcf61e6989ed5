package message_test

import (
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// Every proper prefix of a valid encoding is truncated, never anything
// else, and never a panic.
func TestDecodeTruncatedAtEveryOffset(t *testing.T) {
	for name, m := range samples() {
		t.Run(name, func(t *testing.T) {
			enc := mustEncode(t, m)
			for i := range len(enc) {
				got, err := message.Decode(enc[:i], message.Limits{})
				if !errors.Is(err, message.ErrTruncated) || got != nil {
					t.Fatalf("prefix of %d/%d bytes: got %v, %v; want ErrTruncated", i, len(enc), got, err)
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	hdr := raw(nil).header(byte(message.KindData), 4, 0, 0)
	valid := hdr.data().u16(0).u32(0)
	if _, err := message.Decode(valid, message.Limits{}); err != nil {
		t.Fatalf("the base input must be valid: %v", err)
	}
	props := func(n uint16) raw { return hdr.data().u16(n) }
	cases := map[string]struct {
		in   []byte
		lim  message.Limits
		want error
	}{
		"empty":             {nil, message.Limits{}, message.ErrTruncated},
		"version 0":         {[]byte{0}, message.Limits{}, message.ErrVersion},
		"version 2":         {append([]byte{2}, valid[1:]...), message.Limits{}, message.ErrVersion},
		"kind 0":            {raw(nil).header(0, 4, 0, 0).data().u16(0).u32(0), message.Limits{}, message.ErrKind},
		"kind 4":            {raw(nil).header(4, 4, 0, 0).data().u16(0).u32(0), message.Limits{}, message.ErrKind},
		"priority 10":       {raw(nil).header(2, 10, 0, 0).data().u16(0).u32(0), message.Limits{}, message.ErrPriority},
		"unknown flag":      {raw(nil).header(2, 4, 2, 0).data().u16(0).u32(0), message.Limits{}, message.ErrCorrupt},
		"timestamp no flag": {raw(nil).header(2, 4, 0, 5).data().u16(0).u32(0), message.Limits{}, message.ErrCorrupt},
		"trailing byte":     {append(valid, 0), message.Limits{}, message.ErrCorrupt},
		"bool 2":            {props(1).prop("k", 1, 2).u32(0), message.Limits{}, message.ErrCorrupt},
		"type 0":            {props(1).prop("k", 0, 0).u32(0), message.Limits{}, message.ErrPropertyType},
		"type 10":           {props(1).prop("k", 10, 0).u32(0), message.Limits{}, message.ErrPropertyType},
		"duplicate key":     {props(2).prop("k", 2, 1).prop("k", 2, 2).u32(0), message.Limits{}, message.ErrDuplicateProperty},
		"destination limit": {hdr.str16("abcde").str16("").str16("").u16(0).u32(0),
			message.Limits{MaxHeaderString: 4}, message.ErrHeaderTooLarge},
		"dataType limit": {hdr.str16("d").str16("abcde").str16("").u16(0).u32(0),
			message.Limits{MaxHeaderString: 4}, message.ErrHeaderTooLarge},
		"property count limit": {props(3).prop("a", 2, 1).prop("b", 2, 1).prop("c", 2, 1).u32(0),
			message.Limits{MaxProperties: 2}, message.ErrTooManyProperties},
		"key limit": {props(1).prop("abcde", 2, 1).u32(0),
			message.Limits{MaxPropertyBytes: 4}, message.ErrPropertyTooLarge},
		"key+int64 limit": {props(1).prop("abc", 6, 0, 0, 0, 0, 0, 0, 0, 1).u32(0),
			message.Limits{MaxPropertyBytes: 10}, message.ErrPropertyTooLarge},
		"key+string limit": {props(1).prop("ab", 9, 0, 0, 0, 3, 'x', 'y', 'z').u32(0),
			message.Limits{MaxPropertyBytes: 4}, message.ErrPropertyTooLarge},
		"body limit": {hdr.data().u16(0).u32(5).u8(1).u8(2).u8(3).u8(4).u8(5),
			message.Limits{MaxBody: 4}, message.ErrBodyTooLarge},
		"count beyond input": {props(1000).prop("k", 2, 1).u32(0), message.Limits{MaxProperties: 2000}, message.ErrTruncated},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := message.Decode(c.in, c.lim)
			if !errors.Is(err, c.want) || got != nil {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			if c.lim != (message.Limits{}) {
				return // UnmarshalBinary uses the default limits
			}
			var m message.Message
			m.Destination = "untouched"
			if err := m.UnmarshalBinary(c.in); err == nil || m.Destination != "untouched" {
				t.Fatalf("UnmarshalBinary: err %v, destination %q; want an error and m unchanged", err, m.Destination)
			}
		})
	}
}

// A limit exactly at the size of a field accepts it.
func TestDecodeLimitsAreInclusive(t *testing.T) {
	m := &message.Message{Kind: message.KindData, Destination: "abcd", Body: []byte("1234"),
		Properties: message.Properties{{"ab", message.String("xy")}, {"c", message.Int16(1)}}}
	lim := message.Limits{MaxBody: 4, MaxProperties: 2, MaxPropertyBytes: 4, MaxHeaderString: 4}
	if _, err := message.Decode(mustEncode(t, m), lim); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(lim); err != nil {
		t.Fatal(err)
	}
}

// hugeLengths are tiny inputs that each declare one enormous length.
func hugeLengths() map[string][]byte {
	hdr := raw(nil).header(byte(message.KindData), 4, 0, 0)
	return map[string][]byte{
		"body 2^31":          hdr.data().u16(0).u32(1 << 31),
		"body 2^32-1":        hdr.data().u16(0).u32(math.MaxUint32),
		"bytes value 2^32-1": hdr.data().u16(1).prop("", byte(message.TypeBytes)).u32(math.MaxUint32),
		"string value":       hdr.data().u16(1).prop("k", byte(message.TypeString)).u32(1 << 30),
		"destination":        hdr.u16(math.MaxUint16),
		"key":                hdr.data().u16(1).u16(math.MaxUint16),
		"property count":     hdr.data().u16(math.MaxUint16),
	}
}

// A declared length beyond the input is refused before anything of that
// size is allocated, even when the limits would allow it.
func TestDecodeHugeLengthAllocatesNothingLarge(t *testing.T) {
	lim := message.Limits{MaxBody: math.MaxInt, MaxProperties: math.MaxInt,
		MaxPropertyBytes: math.MaxInt, MaxHeaderString: math.MaxInt}
	for name, in := range hugeLengths() {
		t.Run(name, func(t *testing.T) {
			if _, err := message.Decode(in, lim); !errors.Is(err, message.ErrTruncated) {
				t.Fatalf("err = %v, want ErrTruncated", err)
			}
			const runs = 100
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(runs, func() { _, _ = message.Decode(in, lim) })
			runtime.ReadMemStats(&after)
			// Only the error itself is allocated.
			if allocs > 8 {
				t.Errorf("%v allocations per failed decode", allocs)
			}
			if perRun := (after.TotalAlloc - before.TotalAlloc) / (runs + 1); perRun > 4096 {
				t.Errorf("%d bytes allocated per failed decode", perRun)
			}
		})
	}
}

// A successful decode allocates the message, its strings, its property
// slice and its body: no more, however many strings. (Past 8 properties
// the duplicate check adds a map.)
func TestDecodeAllocations(t *testing.T) {
	enc := mustEncode(t, samples()["file.full"])
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := message.Decode(enc, message.Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 2 {
		t.Errorf("Decode of a message with strings only made %v allocations, want 2", allocs)
	}
	enc = mustEncode(t, oneK())
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := message.Decode(enc, message.Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	// The Message with its four properties, and one buffer for the strings
	// and the body.
	if allocs != 2 {
		t.Errorf("Decode made %v allocations, want 2", allocs)
	}
	m := oneK()
	buf := make([]byte, 0, 4096)
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := m.AppendBinary(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendBinary into a large enough buffer made %v allocations, want 0", allocs)
	}
}

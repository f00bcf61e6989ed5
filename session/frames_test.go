package session

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestHeader(t *testing.T) {
	h := Header{Type: TypeData, Flags: 0x80, Session: 0xdeadbeef, Length: 0x01020304}
	b := AppendHeader([]byte{9}, h)
	want := []byte{9, 12, 0x80, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendHeader = %x, want %x", b, want)
	}
	got, err := ParseHeader(b[1:])
	if err != nil || got != h {
		t.Fatalf("ParseHeader = %+v, %v; want %+v", got, err, h)
	}
	for n := range HeaderLen {
		if _, err := ParseHeader(b[1 : 1+n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseHeader of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
}

func TestTypeString(t *testing.T) {
	tests := []struct {
		t    Type
		want string
		ok   bool
	}{
		{TypeHello, "Hello", true},
		{TypeSessionCreateResponse, "SessionCreateResponse", true},
		{TypePong, "Pong", true},
		{TypeSettle, "Settle", true},
		{0, "Type(0)", false},
		{5, "Type(5)", false},
		{22, "Type(22)", false},
		{255, "Type(255)", false},
	}
	for _, tc := range tests {
		if got := tc.t.String(); got != tc.want || tc.t.Known() != tc.ok {
			t.Errorf("Type(%d): %q known %v, want %q %v", uint8(tc.t), got, tc.t.Known(), tc.want, tc.ok)
		}
	}
}

func TestReadFrame(t *testing.T) {
	two := append(frame(TypePing, 0, 0, Ping{Nonce: 5}), frame(TypeData, 0, 3, Data{Seq: 1, Message: []byte("hello")})...)
	tests := []struct {
		name    string
		in      []byte
		max     uint32
		want    Header
		payload string
		err     error
	}{
		{name: "ping", in: two, max: 100, want: Header{Type: TypePing, Length: 8}, payload: "\x00\x00\x00\x00\x00\x00\x00\x05"},
		{name: "empty payload", in: frame(TypeSessionCloseResponse, 0, 9, nil), max: 0, want: Header{Type: TypeSessionCloseResponse, Session: 9}},
		{name: "clean end", in: nil, max: 100, err: io.EOF},
		{name: "truncated header", in: two[:5], max: 100, err: io.ErrUnexpectedEOF},
		{name: "truncated payload", in: two[:HeaderLen+3], max: 100, want: Header{Type: TypePing, Length: 8}, err: io.ErrUnexpectedEOF},
		{name: "header only", in: two[:HeaderLen], max: 100, want: Header{Type: TypePing, Length: 8}, err: io.ErrUnexpectedEOF},
		{name: "too large", in: two, max: 7, want: Header{Type: TypePing, Length: 8}, err: ErrFrameTooLarge},
		{name: "huge length", in: []byte{12, 0, 0, 0, 0, 1, 0x80, 0, 0, 0}, max: 16 << 20, want: Header{Type: TypeData, Session: 1, Length: 1 << 31}, err: ErrFrameTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, p, err := ReadFrame(bytes.NewReader(tc.in), tc.max, nil)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				if err != io.EOF && h != tc.want && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("header %+v, want %+v", h, tc.want)
				}
				return
			}
			if err != nil || h != tc.want || string(p) != tc.payload {
				t.Fatalf("got %+v %q %v, want %+v %q", h, p, err, tc.want, tc.payload)
			}
		})
	}
}

func TestReadFrameSequence(t *testing.T) {
	var in []byte
	for i := range 5 {
		in = append(in, frame(TypeDataAck, 0, uint32(i+1), DataAck{Seq: uint64(i)})...)
	}
	r := bytes.NewReader(in)
	buf := make([]byte, 0, 64)
	for i := range 5 {
		h, p, err := ReadFrame(r, 100, buf)
		if err != nil || h.Session != uint32(i+1) {
			t.Fatalf("frame %d: %+v %v", i, h, err)
		}
		if &p[0] != &buf[:1][0] {
			t.Fatal("payload that fits was not read into buf")
		}
		if a, err := DecodeDataAck(p); err != nil || a.Seq != uint64(i) {
			t.Fatalf("frame %d: %+v %v", i, a, err)
		}
	}
	if _, _, err := ReadFrame(r, 100, buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	big := frame(TypeData, 0, 1, Data{Seq: 1, Message: bytes.Repeat([]byte{1}, 100)})
	_, p, err := ReadFrame(bytes.NewReader(big), 1000, buf)
	if err != nil || len(p) != 108 || cap(p) != 108 {
		t.Fatalf("payload larger than buf: len %d cap %d, %v; want a new slice of exactly 108", len(p), cap(p), err)
	}
}

// TestReadFrameHugeLengthAllocatesNothing: a 2 GiB length (a TLS alert or
// an HTTP line read as a header) must cost no allocation of that size.
func TestReadFrameHugeLengthAllocatesNothing(t *testing.T) {
	in := []byte{12, 0, 0, 0, 0, 1, 0x80, 0, 0, 0}
	r := bytes.NewReader(in)
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(in)
		if _, _, err := ReadFrame(r, 16<<20, buf); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("err %v, want ErrFrameTooLarge", err)
		}
	})
	if allocs > 8 { // the error message only
		t.Fatalf("%v allocations per refused frame", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		r.Reset(in)
		_, _, _ = ReadFrame(r, 16<<20, nil)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("100 refused frames allocated %d bytes", grew)
	}
	if !strings.Contains(tooLarge(Header{Type: TypeData, Length: 1 << 31}, 16<<20).Error(), "2147483648") {
		t.Fatal("the error does not name the declared length")
	}
}

// TestReadFrameLargePayloadGrowsAsItArrives: a frame that declares 16 MiB
// and sends a few bytes costs about 1 MiB, not 16.
func TestReadFrameLargePayloadGrowsAsItArrives(t *testing.T) {
	const declared = 16 << 20
	in := append(AppendHeader(nil, Header{Type: TypeData, Session: 1, Length: declared}), "only this"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ReadFrame(bytes.NewReader(in), declared, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Fatalf("a declared-only 16 MiB frame allocated %d bytes", grew)
	}
	for _, n := range []int{eagerPayload + 1, 3*eagerPayload + 7, declared} {
		payload := bytes.Repeat([]byte{0xab}, n)
		in := append(AppendHeader(nil, Header{Type: TypeData, Length: uint32(n)}), payload...)
		_, p, err := ReadFrame(bytes.NewReader(in), declared, nil)
		if err != nil || !bytes.Equal(p, payload) || cap(p) != n {
			t.Fatalf("payload of %d: len %d cap %d, %v", n, len(p), cap(p), err)
		}
	}
}

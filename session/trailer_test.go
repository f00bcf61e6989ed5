package session

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// TestFileChecksumTrailerGolden pins the bytes of a checksum trailer on
// the wire: the frame a sender writes must be the one in testdata, and
// reading that frame must give back the sequence number and checksum.
func TestFileChecksumTrailerGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/file-checksum-trailer.hex")
	if err != nil {
		t.Fatal(err)
	}
	var digits strings.Builder
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "#") {
			digits.WriteString(strings.TrimSpace(line))
		}
	}
	want, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Seq: FileChecksumSeq, Message: AppendFileChecksum(nil, emptySum)}
	payload := d.AppendBinary(nil)
	got := AppendHeader(nil, Header{Type: TypeData, Session: 3, Length: uint32(len(payload))})
	got = append(got, payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("trailer frame\n got  %x\n want %x", got, want)
	}
	h, p, err := ReadFrame(bytes.NewReader(want), 1<<20, nil)
	if err != nil || h.Type != TypeData || h.Session != 3 {
		t.Fatalf("ReadFrame = %+v, %v", h, err)
	}
	back, err := DecodeData(p)
	if err != nil || back.Seq != 1<<64-2 {
		t.Fatalf("DecodeData = seq %d, %v; want 2^64-2", back.Seq, err)
	}
	sum, err := ParseFileChecksum(back.Message)
	if err != nil || sum != emptySum {
		t.Fatalf("ParseFileChecksum = %q, %v", sum, err)
	}
}

func TestParseFileChecksumRefuses(t *testing.T) {
	for _, p := range []string{
		"",
		emptySum[:63],
		emptySum + "0",
		strings.ToUpper(emptySum),
		"g" + emptySum[1:],
		" " + emptySum[1:],
	} {
		if sum, err := ParseFileChecksum([]byte(p)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseFileChecksum(%q) = %q, %v; want ErrMalformed", p, sum, err)
		}
	}
}

// FuzzFileChecksum feeds arbitrary payloads to the trailer's parser: it
// must never panic, and what it accepts must be exactly 64 lowercase hex
// digits that encode back to the same payload.
func FuzzFileChecksum(f *testing.F) {
	f.Add([]byte(emptySum))
	f.Add([]byte(strings.ToUpper(emptySum)))
	f.Add([]byte(emptySum[:10]))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, p []byte) {
		sum, err := ParseFileChecksum(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(sum) != 64 || strings.ToLower(sum) != sum {
			t.Fatalf("accepted %q", sum)
		}
		if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
			t.Fatalf("accepted %q, which is not 32 bytes in hex: %v", sum, err)
		}
		if enc := AppendFileChecksum(nil, sum); !bytes.Equal(enc, p) {
			t.Fatalf("not canonical: in %q out %q", p, enc)
		}
	})
}

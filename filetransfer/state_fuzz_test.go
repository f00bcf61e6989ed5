package filetransfer

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// validStateJSON is a state file as writeState writes it: 3 bytes of a
// 5-byte file received.
func validStateJSON(tb testing.TB) []byte {
	tb.Helper()
	h := sha256.New()
	h.Write([]byte("abc"))
	hs, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	info := Info{Filename: "report.csv", Size: 5, SHA256: "36bbe50ed96841d10443bcb670d6554f0a34b761be67ec9c4a8ad2c0c44ca42c"}
	data, err := json.Marshal(state{Version: stateVersion, Info: info, Offset: 3, Hash: hs})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// FuzzDecodeState feeds arbitrary bytes to the spool's state decoder. It
// must never panic, and a state it accepts must be usable as it stands:
// an Info that passes CheckAnnounced (a spool may hold a file whose
// checksum follows its content), an offset within the file, a checksum state
// that resumes, and the same state again after writeState's encoding.
// Seeds are below and under testdata/fuzz/FuzzDecodeState.
func FuzzDecodeState(f *testing.F) {
	valid := validStateJSON(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"info":{"filename":"../x","size":1,"sha256":""},"offset":-1}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		if err := st.Info.CheckAnnounced(); err != nil {
			t.Fatalf("accepted a state whose info fails CheckAnnounced: %v", err)
		}
		if st.Offset < 0 || st.Offset > st.Info.Size {
			t.Fatalf("accepted offset %d of a %d-byte file", st.Offset, st.Info.Size)
		}
		if err := sha256.New().(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Hash); err != nil {
			t.Fatalf("accepted a checksum state that does not resume: %v", err)
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeState(again)
		if err != nil {
			t.Fatalf("re-encoded state refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(back, st) {
			t.Fatalf("state changed in a round trip:\n%+v\n%+v", st, back)
		}
	})
}

func TestDecodeStateRefusesWhatCannotResume(t *testing.T) {
	valid := validStateJSON(t)
	if _, err := decodeState(valid); err != nil {
		t.Fatalf("valid state: %v", err)
	}
	var st state
	if err := json.Unmarshal(valid, &st); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*state)
	}{
		{"negative offset", func(s *state) { s.Offset = -1 }},
		{"offset past the end", func(s *state) { s.Offset = s.Info.Size + 1 }},
		{"no checksum state", func(s *state) { s.Hash = nil }},
		{"a path for a name", func(s *state) { s.Info.Filename = "../../etc/passwd" }},
		{"another version", func(s *state) { s.Version = stateVersion + 1 }},
	}
	for _, tt := range tests {
		bad := st
		tt.mod(&bad)
		data, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeState(data); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

// FuzzParseFileID: the FileID an outbox records beside a file it sent is
// read back from the store; any bytes are refused or read as one FileID,
// which encodes back to the same bytes.
func FuzzParseFileID(f *testing.F) {
	f.Add(FileID{Dev: 2049, Ino: 131, Size: 4096, ModTime: time.Unix(1700000000, 5)}.AppendBinary(nil))
	f.Add([]byte{})
	f.Add(make([]byte, fileIDLen-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ok := ParseFileID(b)
		if !ok {
			if len(b) == fileIDLen {
				t.Fatalf("%d bytes refused", len(b))
			}
			return
		}
		if got := id.AppendBinary(nil); !bytes.Equal(got, b) {
			t.Fatalf("%x read as %+v, which encodes to %x", b, id, got)
		}
	})
}

package petrel

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

var updateInterestGolden = flag.Bool("update-interest-golden", false, "rewrite testdata/interest from goldenInterest")

// goldenInterest is the interest message of testdata/interest: node c
// passes on to its neighbour b's durable subscription to orders.#, as the
// first Data packet of its session 1.
func goldenInterest() *message.Message {
	m := &message.Message{
		ID:          0x0102030405060708,
		Origin:      message.NodeID{0: 0xc0, 15: 0x0c},
		Destination: interestAddr,
		Kind:        message.KindData,
		Priority:    message.DefaultPriority,
		Timestamp:   time.Unix(0, 1767225600000000000).UTC(),
	}
	setInterest(m, opSubscribe, "orders.#", "b", true, []string{"b", "c"})
	return m
}

// TestInterestGolden encodes the golden interest message as the Data
// frame a link carries, compares it with testdata/interest/subscribe.bin
// (and its hex dump, subscribe.hex, which the README's drawing follows),
// and decodes the golden bytes back to the interest.
func TestInterestGolden(t *testing.T) {
	enc, err := goldenInterest().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	payload := session.Data{Seq: 1, Message: enc}.AppendBinary(nil)
	frame := session.AppendHeader(nil, session.Header{Type: session.TypeData, Session: 1, Length: uint32(len(payload))})
	frame = append(frame, payload...)
	bin, hexPath := filepath.Join("testdata", "interest", "subscribe.bin"), filepath.Join("testdata", "interest", "subscribe.hex")
	if *updateInterestGolden {
		if err := os.WriteFile(bin, frame, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hexPath, []byte(hex.Dump(frame)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("interest frame changed; if on purpose, run with -update-interest-golden and redraw the README\ngot:\n%s\nwant:\n%s", hex.Dump(frame), hex.Dump(want))
	}
	dump, err := os.ReadFile(hexPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(dump) != hex.Dump(want) {
		t.Fatal("subscribe.hex is not the dump of subscribe.bin")
	}

	h, err := session.ParseHeader(want)
	if err != nil || h.Type != session.TypeData || int(h.Length) != len(want)-session.HeaderLen {
		t.Fatalf("golden header %+v, %v", h, err)
	}
	d, err := session.DecodeData(want[session.HeaderLen:])
	if err != nil || d.Seq != 1 {
		t.Fatalf("golden Data %+v, %v", d, err)
	}
	m, err := message.Decode(d.Message, message.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if m.Origin != goldenInterest().Origin || m.ID != 0x0102030405060708 || m.Destination != interestAddr {
		t.Fatalf("golden message %+v", m)
	}
	im, err := parseInterest(m)
	if err != nil {
		t.Fatal(err)
	}
	if im.op != opSubscribe || im.pattern != "orders.#" || im.node != "b" || !im.durable || strings.Join(im.hops, ",") != "b,c" {
		t.Fatalf("golden interest %+v", im)
	}
}

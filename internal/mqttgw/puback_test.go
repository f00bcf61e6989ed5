package mqttgw

import (
	"bytes"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// The PUBACK of success that OnPacketEncode hands mochi's MQTT 3.1.1
// encoder has the bytes mochi's MQTT 5 encoder writes, and those MQTT 5
// gives (3.4.2.1): type, remaining length 2, the packet identifier. A
// PUBACK with a reason or a property stays MQTT 5.
func TestPlainPubackBytes(t *testing.T) {
	h := &hook{}
	encode := func(pk packets.Packet) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := pk.PubackEncode(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	ok := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: 0x1234, ReasonCode: packets.CodeSuccess.Code, ProtocolVersion: 5}
	got := h.OnPacketEncode(nil, ok)
	if got.ProtocolVersion != 4 {
		t.Fatalf("plain PUBACK: protocol version %d after the hook, want 4", got.ProtocolVersion)
	}
	want := []byte{0x40, 0x02, 0x12, 0x34}
	if v5, v4 := encode(ok), encode(got); !bytes.Equal(v5, want) || !bytes.Equal(v4, want) {
		t.Fatalf("plain PUBACK: MQTT 5 encoding % x, as 3.1.1 % x; want both % x", v5, v4, want)
	}

	refused := ok
	refused.ReasonCode = packets.ErrNotAuthorized.Code
	withReason := ok
	withReason.Properties.ReasonString = "why"
	withUser := ok
	withUser.Properties.User = []packets.UserProperty{{Key: "k", Val: "v"}}
	for name, pk := range map[string]packets.Packet{"refusal": refused, "reason string": withReason, "user property": withUser} {
		got := h.OnPacketEncode(nil, pk)
		if got.ProtocolVersion != 5 || !bytes.Equal(encode(got), encode(pk)) {
			t.Errorf("%s: the hook changed the PUBACK (version %d)", name, got.ProtocolVersion)
		}
	}
	v3 := ok
	v3.ProtocolVersion = 4
	if got := h.OnPacketEncode(nil, v3); got.ProtocolVersion != 4 || !bytes.Equal(encode(got), want) {
		t.Fatalf("MQTT 3.1.1 PUBACK changed: % x", encode(got))
	}
}

package mqttgw

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/message"
)

// FuzzPublishMapping: whatever topic, payload and user properties a
// client sends, the mapping refuses it with one of the gateway's reason
// codes, or makes a message within the node's limits that maps back to
// the same topic, payload and user properties.
func FuzzPublishMapping(f *testing.F) {
	f.Add("sensors/a", []byte("x"), "k", "v", 1, 0, uint32(0))
	f.Add("sensors/a.b/ü", []byte{}, "mqtt.qos", "1", 3, 2, uint32(60))
	f.Add("$SYS/x", []byte("x"), "", "", 0, 1, uint32(0))
	f.Add("a/+/b", make([]byte, 300), "k", "v", 200, 1, uint32(1))
	lim := message.Limits{MaxBody: 256, MaxProperties: 16, MaxPropertyBytes: 128}
	f.Fuzz(func(t *testing.T, topic string, payload []byte, key, val string, nprops int, qos int, expiry uint32) {
		nprops = min(max(nprops, 0), 64)
		pk := packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: byte(qos & 3 % 3)},
			TopicName:   topic, Payload: payload,
			Properties: packets.Properties{MessageExpiryInterval: expiry},
		}
		for i := range nprops {
			k := key
			if i > 0 {
				k = key + string(rune('a'+i%26)) + string(rune('a'+i/26))
			}
			pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: k, Val: val})
		}
		name, err := TopicToPetrel(topic)
		if err != nil {
			return // answered 0x90 before any message is made
		}
		m := &message.Message{ID: 1, Origin: message.NodeID{1}, Destination: name, Kind: message.KindData, Timestamp: time.Unix(1, 0)}
		err = toMessage(m, pk, "client-1", lim)
		var r *Refusal
		if err != nil {
			if !errors.As(err, &r) || !slices.Contains([]byte{CodeImplementation, CodePacketTooLarge}, r.Code) || r.Reason == "" {
				t.Fatalf("refusal %v is not a known reason code", err)
			}
			return
		}
		if err := m.Validate(lim); err != nil {
			t.Fatalf("accepted message invalid: %v", err)
		}
		back, err := TopicFromPetrel(m.Destination)
		if err != nil || back != topic {
			t.Fatalf("topic %q came back as %q, %v", topic, back, err)
		}
		out := toPacket(m, back, pk.FixedHeader.Qos, time.Unix(1, 0))
		if string(out.Payload) != string(payload) || !slices.Equal(out.Properties.User, pk.Properties.User) && len(pk.Properties.User) > 0 {
			t.Fatalf("payload or user properties changed: %+v -> %+v", pk.Properties.User, out.Properties.User)
		}
		if expiry > 0 && out.Properties.MessageExpiryInterval != expiry {
			t.Fatalf("expiry %d came back as %d", expiry, out.Properties.MessageExpiryInterval)
		}
	})
}

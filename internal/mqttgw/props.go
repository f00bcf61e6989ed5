package mqttgw

import (
	"fmt"
	"strings"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/message"
)

// What an MQTT publish becomes in Petrel, and back:
//
//	MQTT                        Petrel message
//	payload                     Body
//	topic a/b                   Destination a.b (topic.go)
//	QoS                         property mqtt.qos (byte)
//	retain                      property mqtt.retain (bool), when set
//	user property k=v           property k (string v)
//	content type                Data.DataType
//	payload format 1 (UTF-8)    Data.Encoding "utf-8"
//	message expiry (s)          TTL
//	response topic              property mqtt.response_topic (string, MQTT form)
//	correlation data            property mqtt.correlation_data (bytes)
//	the publishing client id    property mqtt.client (for No Local)
//
// A Petrel producer's message reaches MQTT subscribers the same way back:
// its properties (but mqtt.* and petrel.*) as user properties with their
// values' text, DataType as the content type, its remaining TTL as the
// expiry, and a command's ReplyTo and CorrelationID as response topic and
// correlation data when mqtt.* does not give them. Its QoS is the
// subscription's: it is durable already.
//
// User property names starting with "mqtt." or "petrel." are refused, as
// are user properties that repeat a name (Petrel keys are unique): MQTT
// allows both, Petrel properties cannot hold them.
const (
	propQoS         = "mqtt.qos"
	propRetain      = "mqtt.retain"
	propResponse    = "mqtt.response_topic"
	propCorrelation = "mqtt.correlation_data"
	propClient      = "mqtt.client"
)

// toMessage fills m from pk. A refusal is a *Refusal with its code.
func toMessage(m *message.Message, pk packets.Packet, clientID string, lim message.Limits) error {
	m.Body = pk.Payload
	m.Properties.Set(propQoS, message.Byte(pk.FixedHeader.Qos))
	if pk.FixedHeader.Retain {
		m.Properties.Set(propRetain, message.Bool(true))
	}
	m.Properties.Set(propClient, message.String(clientID))
	p := pk.Properties
	// Counted before the loop, whose look for a repeated name is linear
	// in the properties already set: an 8 MiB PUBLISH holds a million
	// empty user properties, which would cost a core minutes before
	// Validate's count refused them.
	if maxProps := effectiveMaxProperties(lim); len(p.User) > maxProps {
		return &Refusal{Code: CodeImplementation, Reason: fmt.Sprintf("%d user properties exceed limit %d: %v", len(p.User), maxProps, message.ErrTooManyProperties)}
	}
	for _, u := range p.User {
		if strings.HasPrefix(u.Key, "mqtt.") || strings.HasPrefix(u.Key, "petrel.") {
			return &Refusal{Code: CodeImplementation, Reason: fmt.Sprintf("user property %q: names starting with mqtt. or petrel. are reserved", clip(u.Key))}
		}
		if _, dup := m.Properties.Get(u.Key); dup {
			return &Refusal{Code: CodeImplementation, Reason: fmt.Sprintf("user property %q repeats a name; petrel properties are unique", clip(u.Key))}
		}
		m.Properties.Set(u.Key, message.String(u.Val))
	}
	m.Data.DataType = p.ContentType
	if p.PayloadFormatFlag && p.PayloadFormat == 1 {
		m.Data.Encoding = "utf-8"
	}
	if p.MessageExpiryInterval > 0 {
		m.TTL = time.Duration(p.MessageExpiryInterval) * time.Second
	}
	if p.ResponseTopic != "" {
		m.Properties.Set(propResponse, message.String(p.ResponseTopic))
	}
	if len(p.CorrelationData) > 0 {
		m.Properties.Set(propCorrelation, message.Bytes(p.CorrelationData))
	}
	if err := m.Validate(lim); err != nil {
		code := CodeImplementation
		if len(m.Body) > effectiveMaxBody(lim) {
			code = CodePacketTooLarge
		}
		return &Refusal{Code: code, Reason: err.Error()}
	}
	return nil
}

func effectiveMaxProperties(lim message.Limits) int {
	if lim.MaxProperties > 0 {
		return lim.MaxProperties
	}
	return message.DefaultLimits().MaxProperties
}

func effectiveMaxBody(lim message.Limits) int {
	if lim.MaxBody > 0 {
		return lim.MaxBody
	}
	return message.DefaultLimits().MaxBody
}

// msgQoS is the QoS m was published with: an MQTT publisher's, or 2 for a
// Petrel producer's, which is durable; the subscription's QoS lowers it.
func msgQoS(m *message.Message) byte {
	if v, ok := m.Properties.Get(propQoS); ok && v.Type() == message.TypeByte && v.ByteVal() <= 2 {
		return v.ByteVal()
	}
	return 2
}

// toPacket builds the PUBLISH of m for topic.
func toPacket(m *message.Message, topic string, qos byte, now time.Time) packets.Packet {
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos},
		TopicName:   topic,
		Payload:     m.Body,
		Created:     now.Unix(),
	}
	p := &pk.Properties
	for _, q := range m.Properties {
		switch {
		case q.Key == propResponse:
			p.ResponseTopic = q.Value.Str()
		case q.Key == propCorrelation:
			p.CorrelationData = q.Value.BytesVal()
		case strings.HasPrefix(q.Key, "mqtt.") || strings.HasPrefix(q.Key, "petrel."):
		case q.Value.Type() == message.TypeString:
			p.User = append(p.User, packets.UserProperty{Key: q.Key, Val: q.Value.Str()})
		default:
			p.User = append(p.User, packets.UserProperty{Key: q.Key, Val: q.Value.String()})
		}
	}
	if v, ok := m.Properties.Get(propRetain); ok && v.Bool() {
		pk.FixedHeader.Retain = true // cleared unless Retain As Published
	}
	p.ContentType = m.Data.DataType
	if m.Data.Encoding == "utf-8" {
		p.PayloadFormat, p.PayloadFormatFlag = 1, true
	}
	if m.Kind == message.KindCommand {
		if p.ResponseTopic == "" && m.Command.ReplyTo != "" {
			p.ResponseTopic = replyTopic(m.Command.ReplyTo)
		}
		if len(p.CorrelationData) == 0 && m.Command.CorrelationID != "" {
			p.CorrelationData = []byte(m.Command.CorrelationID)
		}
	}
	if m.TTL > 0 {
		secs := int64((m.TTL + time.Second - 1) / time.Second)
		pk.Expiry = now.Unix() + secs
		p.MessageExpiryInterval = uint32(secs)
	}
	return pk
}

// replyTopic gives a Petrel reply address its MQTT form when it is a
// topic name, and leaves it as it is otherwise.
func replyTopic(addr string) string {
	name, _, err := message.ParseDestination(addr)
	if err != nil {
		return addr
	}
	if t, err := TopicFromPetrel(name); err == nil {
		return t
	}
	return addr
}

package mqttgw

import (
	"testing"
)

// FuzzQoS2Key: a marker's key gives back the client id and packet
// identifier it was made of, whatever the client id holds; and any key
// read back from the store either parses into a marker whose key is
// itself, or is refused.
func FuzzQoS2Key(f *testing.F) {
	for _, s := range []string{"c", "", "a/b", "ü é", "qos2/", "7/8"} {
		f.Add(s, uint16(1), "qos2/"+s)
	}
	f.Add("x", uint16(65535), "qos2/78/0")
	f.Add("x", uint16(9), "qos2/7g/1")
	f.Add("x", uint16(9), "qos2/7A/+1")
	f.Add("x", uint16(9), "qos2/78/01")
	f.Fuzz(func(t *testing.T, client string, id uint16, key string) {
		if id != 0 {
			c, i, err := parseQoS2Key(qos2Key(client, id))
			if err != nil || c != client || i != id {
				t.Fatalf("qos2Key(%q, %d) parses to %q, %d, %v", client, id, c, i, err)
			}
		}
		if c, i, err := parseQoS2Key(key); err == nil && qos2Key(c, i) != key {
			t.Fatalf("%q parses to %q, %d, whose key is %q", key, c, i, qos2Key(c, i))
		}
	})
}

package mqttgw_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// TestCloseWhileClientsLeave closes a node while half its MQTT clients hang
// up, and checks that Close returns and tells the other half the server is
// shutting down. A client whose session ends on disconnect removes itself
// from mochi's client map; mochi's own Close, which reads that map with two
// read locks, could deadlock against such a removal (mochi-mqtt/server#488).
// The window is narrow, so a round rarely meets it: the test guards the
// close path Petrel uses instead, not a reproduction.
func TestCloseWhileClientsLeave(t *testing.T) {
	const rounds, clients = 8, 16
	for round := range rounds {
		cfg := baseConfig(t)
		// A second listener: the first one's clients leave while the
		// second one's are looked up.
		cfg.MQTT.WebSocket = "127.0.0.1:0"
		tn := openNode(t, cfg)
		conns := make([]*mqttraw.Conn, clients)
		for i := range conns {
			conns[i] = mqttraw.Dial(t, tn.MQTTAddr())
			conns[i].Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5,
				ClientID: fmt.Sprintf("leave-%d-%d", round, i), CleanStart: true, KeepAlive: 60})
		}
		var hangUps sync.WaitGroup
		for _, c := range conns[:clients/2] {
			hangUps.Go(func() { c.Close() })
		}
		closed := make(chan error, 1)
		go func() { closed <- tn.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Close did not return within 30 s while %d clients hung up", round, clients/2)
		}
		hangUps.Wait()
		for i, c := range conns[clients/2:] {
			p := c.Read()
			if d, ok := p.Content.(*packets.Disconnect); !ok || d.ReasonCode != packets.DisconnectServerShuttingDown {
				t.Fatalf("round %d: client %d got %v, want DISCONNECT server shutting down", round, clients/2+i, p)
			}
		}
	}
}

package mqttgw_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// The admin endpoint's /metrics counts MQTT connections, publishes by QoS
// and deliveries; the status lists the sessions.
func TestMetricsAndStatus(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	r := newReceived()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "metered", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, c, "sensors/#", 2)
	for _, q := range []byte{0, 1, 2, 1} {
		if _, err := publish(c, &paho.Publish{Topic: "sensors/m", QoS: q}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		r.next(t)
	}
	resp, err := http.Get("http://" + tn.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"petrel_mqtt_connections 1", "petrel_mqtt_connections_total 1",
		`petrel_mqtt_published_total{qos="0"} 1`, `petrel_mqtt_published_total{qos="1"} 2`, `petrel_mqtt_published_total{qos="2"} 1`,
		`petrel_mqtt_sessions{persistent="false"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(string(b), `petrel_mqtt_delivered_total{qos="1"}`) {
		t.Error("/metrics lacks deliveries")
	}
	st := tn.Status().MQTT
	if len(st.List) != 1 || st.List[0].ClientID != "metered" || !st.List[0].Connected || len(st.List[0].Subscriptions) != 1 {
		t.Fatalf("status sessions %+v", st.List)
	}
}

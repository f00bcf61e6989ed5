package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMQTTOptionsValidate(t *testing.T) {
	ok := MQTTOptions{Clients: 8, QoS: 1, Messages: 100, Size: 128, Subscribers: 1, Inflight: 64, Runs: 1,
		Sync: "full", Timeout: time.Minute}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*MQTTOptions)
		flag string
	}{
		{"no clients", func(o *MQTTOptions) { o.Clients = 0 }, "--clients"},
		{"qos 3", func(o *MQTTOptions) { o.QoS = 3 }, "--qos"},
		{"qos -1", func(o *MQTTOptions) { o.QoS = -1 }, "--qos"},
		{"size below the stamp", func(o *MQTTOptions) { o.Size = mqttStamp - 1 }, "--size"},
		{"negative subscribers", func(o *MQTTOptions) { o.Subscribers = -1 }, "--subscribers"},
		{"no inflight", func(o *MQTTOptions) { o.Inflight = 0 }, "--inflight"},
		{"no runs", func(o *MQTTOptions) { o.Runs = 0 }, "--runs"},
		{"broker not tcp", func(o *MQTTOptions) { o.Broker = "ws://127.0.0.1:80" }, "--broker"},
		{"broker without port", func(o *MQTTOptions) { o.Broker = "tcp://127.0.0.1" }, "--broker"},
		{"sync", func(o *MQTTOptions) { o.Sync = "fast" }, "--sync"},
		{"timeout", func(o *MQTTOptions) { o.Timeout = 0 }, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.validate()
			if _, isUsage := errors.AsType[*UsageError](err); !isUsage || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("validate = %v, want a usage error naming %s", err, tc.flag)
			}
		})
	}
}

// The summary takes each figure's median over the rounds, the ratios'
// median of the rounds' own ratios, and sums the counts.
func TestMQTTSummarize(t *testing.T) {
	round := func(p, mp float64) MQTTRound {
		return MQTTRound{
			Broker:       MQTTFigures{PublishMsgsPerSec: p, DeliveredMsgsPerSec: p, Delivered: 10, Duplicates: 1, P50ms: p / 10},
			Mosquitto:    &MQTTFigures{PublishMsgsPerSec: mp, DeliveredMsgsPerSec: mp, Delivered: 10},
			PublishRatio: ratio(p, mp), DeliveredRatio: ratio(p, mp),
		}
	}
	r := &MQTTResult{Rounds: []MQTTRound{round(100, 50), round(300, 60), round(200, 400)}}
	r.summarize()
	if r.PublishMsgsPerSec != 200 || r.P50ms != 20 || r.Delivered != 30 || r.Duplicates != 3 {
		t.Errorf("broker summary %+v, want median 200 msgs/s, p50 20 ms, 30 copies, 3 duplicates", r.MQTTFigures)
	}
	if r.Mosquitto == nil || r.Mosquitto.PublishMsgsPerSec != 60 {
		t.Fatalf("mosquitto summary %+v, want median 60 msgs/s", r.Mosquitto)
	}
	// Rounds' ratios 2, 5 and 0.5: their median is 2, where the medians'
	// ratio would be 200/60.
	if r.PublishRatio != 2 || r.DeliveredRatio != 2 {
		t.Errorf("ratios %v, %v, want 2", r.PublishRatio, r.DeliveredRatio)
	}
}

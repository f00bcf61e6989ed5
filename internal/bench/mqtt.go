package bench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The MQTT bench: paho clients publish and subscribe through one MQTT
// broker, a Petrel node's MQTT listener or any broker named by --broker,
// and with --against-mosquitto through Eclipse Mosquitto (persistence on)
// in the same invocation, round after round, so that the two figures are
// comparable.

// MQTTOptions are the flags of `bench mqtt`.
type MQTTOptions struct {
	Clients, QoS, Messages, Size, Subscribers, Inflight, Runs int
	// Broker is the URL of the broker to measure, tcp://host:port; "" for
	// a Petrel node this bench starts.
	Broker string
	// AgainstMosquitto measures mosquitto too, in each round, as the
	// baseline; Mosquitto names its binary ("" to look it up).
	AgainstMosquitto bool
	Mosquitto        string
	// Sync is the Petrel node's store sync mode, as the config file
	// spells it.
	Sync    string
	Dir     string
	Keep    bool
	JSON    bool
	Timeout time.Duration
}

// MQTTFigures are what one broker did in one round, or the medians of
// the rounds. The field names are a contract with the scripts that
// compare runs: add, never rename.
type MQTTFigures struct {
	// PublishMsgsPerSec is messages / (first publish -> last PUBACK, or at
	// QoS 0 last publish written).
	PublishMsgsPerSec float64 `json:"publish_msgs_per_sec"`
	// DeliveredMsgsPerSec is copies delivered to the subscribers / (first
	// publish -> last copy delivered).
	DeliveredMsgsPerSec float64 `json:"delivered_msgs_per_sec"`
	// Delivered counts distinct copies (message, subscriber); Duplicates
	// copies delivered again; Lost copies never delivered, which only QoS
	// 0 may leave (QoS 1 waits for every copy).
	Delivered  int64 `json:"delivered"`
	Duplicates int64 `json:"duplicates"`
	Lost       int64 `json:"lost"`
	// P50ms, P99ms and MaxMs time publish -> delivery: from the Publish
	// call to the subscriber's handler, over every distinct copy.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// StoreCommits, for a Petrel node the bench started, are its store's
	// group commits during the round (each one fsync with sync full),
	// for publishes, deliveries and acks together, and
	// StoreCommitRequests the requests they carried; 0 for other brokers.
	StoreCommits        int64 `json:"store_commits,omitempty"`
	StoreCommitRequests int64 `json:"store_commit_requests,omitempty"`
}

// MQTTRound is one round: the broker measured, and mosquitto beside it.
type MQTTRound struct {
	Broker    MQTTFigures  `json:"broker"`
	Mosquitto *MQTTFigures `json:"mosquitto,omitempty"`
	// PublishRatio and DeliveredRatio divide the broker's rates by
	// mosquitto's in the same round; 0 without mosquitto.
	PublishRatio   float64 `json:"publish_ratio,omitempty"`
	DeliveredRatio float64 `json:"delivered_ratio,omitempty"`
}

// MQTTResult is the JSON object of `bench mqtt --json`. The field names
// are a contract with the scripts that compare runs: add, never rename.
type MQTTResult struct {
	Scenario string `json:"scenario"` // "mqtt"
	// Broker is "petrel" for the node the bench started, else --broker.
	Broker      string `json:"broker"`
	Clients     int    `json:"clients"`
	QoS         int    `json:"qos"`
	Messages    int    `json:"messages"`
	Size        int    `json:"size"`
	Subscribers int    `json:"subscribers"`
	Inflight    int    `json:"inflight"`
	// MQTTFigures are the broker's, the medians of the rounds.
	MQTTFigures
	// Mosquitto, with --against-mosquitto, are mosquitto's medians, and
	// MosquittoVersion its version line.
	Mosquitto        *MQTTFigures `json:"mosquitto,omitempty"`
	MosquittoVersion string       `json:"mosquitto_version,omitempty"`
	// PublishRatio and DeliveredRatio are the medians of the rounds'
	// ratios, broker / mosquitto (each round pairs two runs made side by
	// side); 0 without mosquitto.
	PublishRatio   float64     `json:"publish_ratio,omitempty"`
	DeliveredRatio float64     `json:"delivered_ratio,omitempty"`
	Rounds         []MQTTRound `json:"rounds"`
	CPUs           int         `json:"cpus"`
	GoVersion      string      `json:"go_version"`
}

func (o MQTTOptions) validate() error {
	for _, c := range []struct {
		flag string
		v    int
		min  int
	}{
		// No subscribers measures publishing alone.
		{"clients", o.Clients, 1}, {"messages", o.Messages, 1}, {"subscribers", o.Subscribers, 0},
		{"inflight", o.Inflight, 1}, {"runs", o.Runs, 1},
		// Every message carries its send time and number.
		{"size", o.Size, mqttStamp},
	} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.Messages > 1<<31 {
		return usageErrorf("invalid argument %d for \"--messages\" flag: want at most %d", o.Messages, 1<<31)
	}
	if o.QoS < 0 || o.QoS > 2 {
		return usageErrorf("invalid argument %d for \"--qos\" flag: want 0, 1 or 2", o.QoS)
	}
	if o.Broker != "" {
		u, err := url.Parse(o.Broker)
		if err != nil || u.Scheme != "tcp" || u.Host == "" || u.Port() == "" {
			return usageErrorf("invalid argument %q for \"--broker\" flag: want tcp://host:port", o.Broker)
		}
	} else if _, err := parseSync(o.Sync); err != nil {
		return err
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return err
	}
	return checkDir(o.Dir)
}

// RunMQTT runs `bench mqtt`: o.Runs rounds, each measuring the broker
// and, with o.AgainstMosquitto, mosquitto. It prints the figures, or one
// JSON object with o.JSON, on stdout, and progress on stderr.
func RunMQTT(ctx context.Context, o MQTTOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	var mosq string
	if o.AgainstMosquitto {
		var err error
		if mosq, err = FindMosquitto(o.Mosquitto); err != nil {
			return err
		}
	}
	b := procBench{name: "mqtt", parent: o.Dir, keep: o.Keep, timeout: o.Timeout, json: o.JSON}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		mb := &mqttBench{o: o, exe: exe, mosquitto: mosq, dir: dir, life: life, progress: stderr}
		return mb.run(ctx)
	})
}

// mqttBench is one invocation of the bench.
type mqttBench struct {
	o              MQTTOptions
	exe, mosquitto string
	dir            string
	life           context.Context
	progress       io.Writer
}

func (b *mqttBench) run(ctx context.Context) (*MQTTResult, error) {
	o := b.o
	res := &MQTTResult{Scenario: "mqtt", Broker: o.Broker, Clients: o.Clients, QoS: o.QoS, Messages: o.Messages,
		Size: o.Size, Subscribers: o.Subscribers, Inflight: o.Inflight, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if res.Broker == "" {
		res.Broker = "petrel"
	}
	if b.mosquitto != "" {
		res.MosquittoVersion = mosquittoVersion(ctx, b.mosquitto)
	}
	for i := range o.Runs {
		var round MQTTRound
		// Odd rounds measure mosquitto second, so that neither broker
		// always runs on a cooler machine.
		measureMosquitto := func() error {
			if b.mosquitto == "" {
				return nil
			}
			f, err := b.roundMosquitto(ctx, i)
			round.Mosquitto = &f
			return err
		}
		if i%2 == 0 {
			if err := measureMosquitto(); err != nil {
				return nil, err
			}
		}
		f, err := b.roundBroker(ctx, i)
		if err != nil {
			return nil, err
		}
		round.Broker = f
		if i%2 == 1 {
			if err := measureMosquitto(); err != nil {
				return nil, err
			}
		}
		if m := round.Mosquitto; m != nil {
			round.PublishRatio = ratio(f.PublishMsgsPerSec, m.PublishMsgsPerSec)
			round.DeliveredRatio = ratio(f.DeliveredMsgsPerSec, m.DeliveredMsgsPerSec)
		}
		res.Rounds = append(res.Rounds, round)
	}
	res.summarize()
	return res, nil
}

// roundBroker measures the broker of --broker, or a Petrel node started
// for the round.
func (b *mqttBench) roundBroker(ctx context.Context, i int) (MQTTFigures, error) {
	if b.o.Broker != "" {
		fmt.Fprintf(b.progress, "round %d: %s...\n", i+1, b.o.Broker)
		return b.measure(ctx, b.o.Broker)
	}
	return b.roundPetrel(ctx, i)
}

// roundMosquitto starts mosquitto with fresh persistence, measures it and
// stops it.
func (b *mqttBench) roundMosquitto(ctx context.Context, i int) (f MQTTFigures, err error) {
	m, err := StartMosquitto(b.life, b.mosquitto, fmt.Sprintf("%s/mosquitto-%d", b.dir, i+1))
	if err != nil {
		return MQTTFigures{}, err
	}
	defer func() {
		if serr := m.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop mosquitto: %w", serr)
		}
	}()
	fmt.Fprintf(b.progress, "round %d: mosquitto on %s, pid %d...\n", i+1, m.URL(), m.Pid())
	f, err = b.measure(ctx, m.URL())
	if err != nil {
		return f, fmt.Errorf("mosquitto: %w", err)
	}
	return f, nil
}

// measure runs one round of clients against url.
func (b *mqttBench) measure(ctx context.Context, url string) (MQTTFigures, error) {
	f, err := measureMQTT(ctx, b.o, url)
	if err != nil {
		return MQTTFigures{}, err
	}
	pct := f.lat.percentiles(50, 99, 100)
	return MQTTFigures{
		PublishMsgsPerSec:   round(f.publish, 2),
		DeliveredMsgsPerSec: round(f.delivered, 2),
		Delivered:           f.copies, Duplicates: f.duplicates, Lost: f.lost,
		P50ms: round(ms(pct[0]), 3), P99ms: round(ms(pct[1]), 3), MaxMs: round(ms(pct[2]), 3),
	}, nil
}

// mosquittoVersion is the first line of `mosquitto -h`, "mosquitto
// version 2.0.11"; "" if it cannot be had.
func mosquittoVersion(ctx context.Context, exe string) string {
	out, _ := exec.CommandContext(ctx, exe, "-h").Output() // exits 3 after its help
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// median is the median of v, sorted in place.
func median(v []float64) float64 {
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// medianOf returns the median of get over the rounds.
func medianOf[T any](rounds []T, get func(T) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = get(r)
	}
	return median(v)
}

// summarize sets the medians from the rounds. Counts are summed.
func (r *MQTTResult) summarize() {
	pick := func(side func(MQTTRound) MQTTFigures) MQTTFigures {
		m := func(get func(MQTTFigures) float64) float64 {
			return medianOf(r.Rounds, func(rd MQTTRound) float64 { return get(side(rd)) })
		}
		var f MQTTFigures
		for _, rd := range r.Rounds {
			s := side(rd)
			f.Delivered += s.Delivered
			f.Duplicates += s.Duplicates
			f.Lost += s.Lost
		}
		f.PublishMsgsPerSec = round(m(func(f MQTTFigures) float64 { return f.PublishMsgsPerSec }), 2)
		f.DeliveredMsgsPerSec = round(m(func(f MQTTFigures) float64 { return f.DeliveredMsgsPerSec }), 2)
		f.P50ms = round(m(func(f MQTTFigures) float64 { return f.P50ms }), 3)
		f.P99ms = round(m(func(f MQTTFigures) float64 { return f.P99ms }), 3)
		f.MaxMs = round(m(func(f MQTTFigures) float64 { return f.MaxMs }), 3)
		f.StoreCommits = int64(m(func(f MQTTFigures) float64 { return float64(f.StoreCommits) }))
		f.StoreCommitRequests = int64(m(func(f MQTTFigures) float64 { return float64(f.StoreCommitRequests) }))
		return f
	}
	r.MQTTFigures = pick(func(rd MQTTRound) MQTTFigures { return rd.Broker })
	if len(r.Rounds) > 0 && r.Rounds[0].Mosquitto != nil {
		m := pick(func(rd MQTTRound) MQTTFigures { return *rd.Mosquitto })
		r.Mosquitto = &m
		r.PublishRatio = round(medianOf(r.Rounds, func(rd MQTTRound) float64 { return rd.PublishRatio }), 3)
		r.DeliveredRatio = round(medianOf(r.Rounds, func(rd MQTTRound) float64 { return rd.DeliveredRatio }), 3)
	}
}

func (r *MQTTResult) figures() []figure {
	of := ""
	if len(r.Rounds) > 1 {
		of = fmt.Sprintf("; medians of %d rounds", len(r.Rounds))
	}
	figs := []figure{
		{"scenario", fmt.Sprintf("mqtt: %d publishers (QoS %d, %d in flight each), %d subscribers to %s<run>/#, %d messages of %d B%s",
			r.Clients, r.QoS, r.Inflight, r.Subscribers, MQTTTopicPrefix, r.Messages, r.Size, of)},
	}
	figs = append(figs, r.MQTTFigures.lines(r.Broker)...)
	if m := r.Mosquitto; m != nil {
		figs = append(figs, m.lines("mosquitto")...)
		figs = append(figs,
			figure{"publish ratio", fmt.Sprintf("%.3f (%s / mosquitto, median of the rounds)", r.PublishRatio, r.Broker)},
			figure{"delivered ratio", fmt.Sprintf("%.3f (%s / mosquitto, median of the rounds)", r.DeliveredRatio, r.Broker)})
		if r.MosquittoVersion != "" {
			figs = append(figs, figure{"mosquitto version", r.MosquittoVersion + " (persistence true)"})
		}
	}
	if len(r.Rounds) > 1 {
		for i, rd := range r.Rounds {
			v := fmt.Sprintf("%s publish %.0f delivered %.0f msgs/s", r.Broker, rd.Broker.PublishMsgsPerSec, rd.Broker.DeliveredMsgsPerSec)
			if m := rd.Mosquitto; m != nil {
				v += fmt.Sprintf("; mosquitto publish %.0f delivered %.0f msgs/s; ratios %.3f, %.3f",
					m.PublishMsgsPerSec, m.DeliveredMsgsPerSec, rd.PublishRatio, rd.DeliveredRatio)
			}
			figs = append(figs, figure{fmt.Sprintf("round %d", i+1), v})
		}
	}
	return figs
}

// lines are the human figures of one broker.
func (f MQTTFigures) lines(name string) []figure {
	figs := []figure{
		{name + " publish", fmt.Sprintf("%.0f msgs/s", f.PublishMsgsPerSec)},
		{name + " delivered", fmt.Sprintf("%.0f msgs/s (%d copies, %d duplicates, %d lost)",
			f.DeliveredMsgsPerSec, f.Delivered, f.Duplicates, f.Lost)},
		{name + " latency", fmt.Sprintf("p50 %.3f ms, p99 %.3f ms, max %.3f ms (publish -> delivery)", f.P50ms, f.P99ms, f.MaxMs)},
	}
	if f.StoreCommits > 0 {
		figs = append(figs, figure{name + " store commits", fmt.Sprintf("%d group commits carrying %d requests (publishes, deliveries, acks)",
			f.StoreCommits, f.StoreCommitRequests)})
	}
	return figs
}

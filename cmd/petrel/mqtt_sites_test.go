package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestMQTTAcrossSitesThroughKills runs three petrel node processes, a ->
// c -> b, every one declaring the topic space site.#, with MQTT listeners
// at a and b. At b a real mosquitto_sub holds a persistent session
// (-q 1 -c -i site-b -t site/#); at a a paho client publishes QoS 1
// messages to site/m, each awaited for its PUBACK, while b is SIGKILLed
// and restarted twice. mosquitto_sub reconnects by itself. Every
// acknowledged publish must reach it, none lost; QoS 1 allows duplicates
// (a delivery whose PUBACK died with b comes again), and they are counted
// and logged as a figure.
//
// By default it publishes 1,000 messages; PETREL_LONG=1 publishes 10,000:
//
//	PETREL_LONG=1 go test -run TestMQTTAcrossSitesThroughKills -v ./cmd/petrel
func TestMQTTAcrossSitesThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("the cross-site crash test runs without -short")
	}
	subBin, err := exec.LookPath("mosquitto_sub")
	if err != nil {
		t.Fatalf("mosquitto_sub: %v (package mosquitto-clients; .ci/run installs it)", err)
	}
	messages, rate := 1000, 150
	if os.Getenv("PETREL_LONG") == "1" {
		messages, rate = 10_000, 500
	}
	s := newMQTTSites(t, subBin)
	for _, name := range []string{"b", "c", "a"} {
		s.start(name)
	}
	s.startSub()
	pub := s.publisher()
	s.probe(pub)

	var published atomic.Int64
	pubDone := make(chan error, 1)
	go func() { pubDone <- publishPaced(s.ctx, pub, messages, rate, &published) }()
	kills := 0
	for _, at := range []int64{int64(messages) / 3, 2 * int64(messages) / 3} {
		if !petreltest.Holds(5*time.Minute, func() bool { return published.Load() >= at }) {
			t.Fatalf("the publisher did not reach %d publishes (at %d)", at, published.Load())
		}
		s.procs["b"].Kill()
		kills++
		// b stays down a moment: publishes pile up at c meanwhile, and
		// mosquitto_sub's reconnects are refused.
		time.Sleep(500 * time.Millisecond)
		s.start("b")
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish at a: %v (%d acknowledged)", err, published.Load())
	}
	want := make([]string, messages)
	for i := range want {
		want[i] = "m-" + strconv.Itoa(i)
	}
	if !petreltest.Holds(5*time.Minute, func() bool { return s.tally(want).missing == 0 }) {
		tl := s.tally(want)
		t.Fatalf("not every acknowledged publish reached mosquitto_sub at b: %d of %d missing, e.g. %v",
			tl.missing, messages, tl.examples)
	}
	tl := s.tally(want)
	t.Logf("mqtt across sites: published %d at a (QoS 1, acknowledged), b killed %d times, mosquitto_sub started %d times; "+
		"delivered %d distinct, lost 0, duplicates %d, unexpected %d",
		messages, kills, s.subStarts, messages, tl.duplicates, tl.unexpected)
	if tl.unexpected > 0 {
		t.Errorf("%d payloads at b that a never published, e.g. %v", tl.unexpected, tl.examples)
	}
}

// mqttSites is the three nodes of the cross-site test and b's subscriber.
type mqttSites struct {
	t      *testing.T
	dir    string
	subBin string
	ctx    context.Context
	ports  map[string]int // link listeners, and "a-mqtt", "b-mqtt"
	procs  map[string]*nodeproc.Proc
	// subs are mosquitto_sub's incarnations, in order; subStarts counts them.
	subs      []*nodeproc.Proc
	subStarts int
}

func newMQTTSites(t *testing.T, subBin string) *mqttSites {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	s := &mqttSites{t: t, dir: dir, subBin: subBin, ctx: ctx, ports: map[string]int{}, procs: map[string]*nodeproc.Proc{}}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		cancel()
		for _, p := range s.procs {
			p.Kill()
		}
		for _, p := range s.subs {
			p.Kill()
		}
	})
	for _, k := range []string{"a", "b", "c", "a-mqtt", "b-mqtt"} {
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s.ports[k] = port
	}
	topics := "topics:\n  - pattern: \"site.#\"\n"
	mqtt := func(name string) string {
		return fmt.Sprintf("mqtt:\n  listen: %q\n", s.addr(name+"-mqtt"))
	}
	files := []nodeproc.NodeFile{
		{Name: "a", Nodes: [][2]string{{"c", s.connector("c")}}, Extra: topics + mqtt("a")},
		{Name: "c", Nodes: [][2]string{{"a", s.connector("a")}, {"b", s.connector("b")}}, Extra: topics},
		{Name: "b", Nodes: [][2]string{{"c", s.connector("c")}}, Extra: topics + mqtt("b")},
	}
	for _, f := range files {
		f.Listen = s.addr(f.Name)
		f.DataDir = filepath.Join(dir, f.Name)
		f.ReconnectMin, f.ReconnectMax = 10*time.Millisecond, 200*time.Millisecond
		if err := f.Write(s.configPath(f.Name)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *mqttSites) addr(key string) string       { return "127.0.0.1:" + strconv.Itoa(s.ports[key]) }
func (s *mqttSites) connector(name string) string { return "tcp://" + s.addr(name) }
func (s *mqttSites) configPath(name string) string {
	return filepath.Join(s.dir, name+".yaml")
}

// start starts node name on its configuration and data directory, and
// waits until it is ready; its ports are fixed, so it tries again while
// one is briefly taken by someone else.
func (s *mqttSites) start(name string) {
	s.t.Helper()
	p := startProc(s.t, s.ctx, s.dir, name, "node", "-c", s.configPath(name))
	s.procs[name] = p
}

// startSub starts mosquitto_sub at b with its persistent session. It
// reconnects by itself when b goes away; lines are payloads.
func (s *mqttSites) startSub() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr("b-mqtt"))
	p, err := nodeproc.Start(s.ctx, "mosquitto_sub", s.subBin, filepath.Join(s.dir, "mosquitto_sub.stderr"),
		"-h", "127.0.0.1", "-p", port, "-q", "1", "-c", "-i", "site-b", "-t", "site/#")
	if err != nil {
		s.t.Fatal(err)
	}
	s.subs = append(s.subs, p)
	s.subStarts++
}

// subLines returns every line of every mosquitto_sub incarnation. One
// that ended (it gave up on b) is started again, as a user would: its
// session, and what waits in it, is b's.
func (s *mqttSites) subLines() []string {
	var out []string
	for _, p := range s.subs {
		out = append(out, p.Lines()...)
	}
	if last := s.subs[len(s.subs)-1]; !last.Running() {
		s.t.Logf("%v; started again", last.ExitError("ended"))
		s.startSub()
	}
	return out
}

// publisher connects a paho client (MQTT 5) to a's listener.
func (s *mqttSites) publisher() *paho.Client {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.addr("a-mqtt"))
	if err != nil {
		s.t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn, PacketTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "site-a-publisher", CleanStart: true, KeepAlive: 30}); err != nil {
		conn.Close()
		s.t.Fatalf("connect to a's MQTT listener: %v", err)
	}
	s.t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
	return c
}

// probe publishes probes at a until one reaches mosquitto_sub at b: the
// interest of b's subscription has then crossed c to a.
func (s *mqttSites) probe(c *paho.Client) {
	s.t.Helper()
	for i := 0; ; i++ {
		payload := "probe-" + strconv.Itoa(i)
		if _, err := c.Publish(s.ctx, &paho.Publish{Topic: "site/probe", QoS: 1, Payload: []byte(payload)}); err != nil {
			s.t.Fatalf("probe at a: %v", err)
		}
		seen := petreltest.Holds(time.Second, func() bool {
			for _, l := range s.subLines() {
				if strings.HasPrefix(l, "probe-") {
					return true
				}
			}
			return false
		})
		if seen {
			return
		}
		if i >= 120 {
			s.t.Fatalf("no probe published at a reached mosquitto_sub at b in %d tries", i+1)
		}
	}
}

// publishPaced publishes m-0 .. m-(n-1) to site/m at QoS 1, about rate a
// second, 8 in flight, and counts in published each one acknowledged.
func publishPaced(ctx context.Context, c *paho.Client, n, rate int, published *atomic.Int64) error {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= int64(n) {
					return
				}
				if d := time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate))); d > 0 {
					time.Sleep(d) // pacing, so that b's kills fall among the publishes
				}
				p := &paho.Publish{Topic: "site/m", QoS: 1, Payload: []byte("m-" + strconv.FormatInt(k, 10))}
				if _, err := c.Publish(ctx, p); err != nil {
					errs <- fmt.Errorf("m-%d: %w", k, err)
					return
				}
				published.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// sitesTally is what mosquitto_sub printed, against what was published.
type sitesTally struct {
	missing, duplicates, unexpected int
	examples                        []string
}

// tally counts the lines of mosquitto_sub against want; probes are not
// counted.
func (s *mqttSites) tally(want []string) sitesTally {
	seen := map[string]int{}
	var tl sitesTally
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w] = true
	}
	for _, l := range s.subLines() {
		if strings.HasPrefix(l, "probe-") {
			continue
		}
		if !wanted[l] {
			tl.unexpected++
			if len(tl.examples) < 5 {
				tl.examples = append(tl.examples, fmt.Sprintf("unexpected %q", l))
			}
			continue
		}
		seen[l]++
		if seen[l] > 1 {
			tl.duplicates++
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			tl.missing++
			if len(tl.examples) < 10 {
				tl.examples = append(tl.examples, w)
			}
		}
	}
	return tl
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/bench"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/message"
)

// The topic tests across processes: every node is a `petrel node` or a
// `petrel bench agent produce` process with the topic space orders.#, its
// durable subscriptions made beforehand on its data directory. What the
// subscriptions hold is read back once every process stopped, by opening
// each data directory in this process.

const (
	topicSpace = "orders.#"
	topicName  = "orders.eu.created"
)

// topicNode is one node of a topic cluster.
type topicNode struct {
	name       string
	neighbours []string
	// subs are the node's durable subscriptions, name -> pattern.
	subs [][2]string
	// produce, when set, runs the node as `bench agent produce` with these
	// flags after its -c and --to.
	produce []string
}

// topicCluster is the processes of a topic test, each listening on a port
// of its own that it keeps across restarts.
type topicCluster struct {
	t     *testing.T
	dir   string
	ctx   context.Context
	nodes map[string]topicNode
	ports map[string]int
	procs map[string]*nodeproc.Proc
	// lines keeps what every incarnation of a producer printed.
	lines map[string][]*nodeproc.Proc
	// connectors overrides a neighbour's connector: from -> to -> URL.
	connectors map[string]map[string]string
}

func newTopicCluster(t *testing.T, nodes ...topicNode) *topicCluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl := &topicCluster{t: t, dir: t.TempDir(), ctx: ctx, nodes: map[string]topicNode{}, ports: map[string]int{},
		procs: map[string]*nodeproc.Proc{}, lines: map[string][]*nodeproc.Proc{}, connectors: map[string]map[string]string{}}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		cancel()
		for _, p := range cl.procs {
			p.Kill()
		}
	})
	for _, n := range nodes {
		cl.nodes[n.name] = n
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cl.ports[n.name] = port
	}
	return cl
}

func (cl *topicCluster) dataDir(name string) string { return filepath.Join(cl.dir, name) }
func (cl *topicCluster) listen(name string) string {
	return "127.0.0.1:" + strconv.Itoa(cl.ports[name])
}

// prepare writes every node's configuration file and makes its durable
// subscriptions on its data directory, before any process starts.
func (cl *topicCluster) prepare() {
	cl.t.Helper()
	for name, n := range cl.nodes {
		f := nodeproc.NodeFile{Name: name, DataDir: cl.dataDir(name), Listen: cl.listen(name),
			ReconnectMin: 10 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
			Extra: fmt.Sprintf("topics:\n  - pattern: %q\n", topicSpace)}
		for _, nb := range n.neighbours {
			conn := "tcp://" + cl.listen(nb)
			if c, ok := cl.connectors[name][nb]; ok {
				conn = c
			}
			f.Nodes = append(f.Nodes, [2]string{nb, conn})
		}
		if err := f.Write(filepath.Join(cl.dir, name+".yaml")); err != nil {
			cl.t.Fatal(err)
		}
		if len(n.subs) > 0 {
			cl.offline(name, func(node *petrel.Node) {
				for _, s := range n.subs {
					c, err := node.Subscribe(context.Background(), s[1], petrel.SubscribeOptions{Name: s[0], Durable: true})
					if err != nil {
						cl.t.Fatalf("%s: subscribe %s to %s: %v", name, s[0], s[1], err)
					}
					c.Close()
				}
			})
		}
	}
}

// offline opens node name's data directory in this process, with no
// listener, runs f and closes it. neighbours, when given, are its
// configured nodes, so that what f withdraws is queued toward them.
func (cl *topicCluster) offline(name string, f func(*petrel.Node), neighbours ...string) {
	cl.t.Helper()
	cfg := petrel.Config{Name: name, DataDir: cl.dataDir(name), Logger: slog.New(slog.DiscardHandler),
		Topics: []petrel.TopicConfig{{Pattern: topicSpace}}}
	for _, nb := range neighbours {
		cfg.Nodes = append(cfg.Nodes, petrel.NodeConfig{Name: nb, Connector: "tcp://" + cl.listen(nb)})
	}
	node, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		cl.t.Fatalf("open %s's data: %v", name, err)
	}
	defer node.Close()
	f(node)
}

// start starts node name, as an agent that publishes if it produces, and
// waits until it is ready.
func (cl *topicCluster) start(name string) {
	cl.t.Helper()
	n := cl.nodes[name]
	cfg := filepath.Join(cl.dir, name+".yaml")
	args := []string{"node", "-c", cfg}
	if n.produce != nil {
		args = append([]string{"bench", "agent", "produce", "-c", cfg, "--to", topicName}, n.produce...)
	}
	p := startProc(cl.t, cl.ctx, cl.dir, name, args...)
	cl.procs[name] = p
	if n.produce != nil {
		cl.lines[name] = append(cl.lines[name], p)
	}
}

// producerLines returns what every incarnation of producer name printed.
func (cl *topicCluster) producerLines(name string) []string {
	var all []string
	for _, p := range cl.lines[name] {
		all = append(all, p.Lines()...)
	}
	return all
}

// produced reports whether producer name printed its produced event.
func (cl *topicCluster) produced(name string) bool {
	return countPrefixed(cl.procs[name].Lines(), `{"event":"produced"`) > 0
}

// waitProduced waits for the drained event of every producer: each had
// every publish durable, and then its send queues empty.
func (cl *topicCluster) waitProduced(names ...string) {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(cl.ctx, 3*time.Minute)
	defer cancel()
	for _, name := range names {
		var dr bench.DrainedEvent
		if err := cl.procs[name].WaitEvent(ctx, "drained", &dr); err != nil {
			cl.t.Fatalf("%s: %v", name, err)
		}
	}
}

// settle waits until, in one pass over every node, each send queue and
// each topic inbox is empty, nothing in flight, twice in a row: a copy
// moves from a link to the next node's inbox and on to its links, and
// one pass may look at each place just before it arrives there.
func (cl *topicCluster) settle() {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(cl.ctx, 3*time.Minute)
	defer cancel()
	quiet, last := 0, ""
	for quiet < 2 {
		busy := ""
		for name := range cl.nodes {
			st, err := readNodeStatus(ctx, "", "", cl.dataDir(name), "")
			if err != nil {
				busy = fmt.Sprintf("%s: %v", name, err)
				break
			}
			for _, l := range st.Links {
				if l.Depth > 0 || l.InFlight > 0 {
					busy = fmt.Sprintf("%s's link %s: depth %d, in flight %d", name, l.Queue, l.Depth, l.InFlight)
				}
			}
			for _, q := range st.Queues {
				if q.Name == "topic:inbox" && q.Depth > 0 {
					busy = fmt.Sprintf("%s's topic inbox: depth %d", name, q.Depth)
				}
			}
		}
		if busy == "" {
			quiet++
		} else {
			quiet, last = 0, busy
		}
		select {
		case <-ctx.Done():
			cl.t.Fatalf("the nodes did not settle: %v; last seen busy: %s", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metrics scrapes the /metrics of node name through its admin socket.
func (cl *topicCluster) metrics(name string) map[string]float64 {
	cl.t.Helper()
	m, err := scrapeSocket(cl.ctx, cl.dataDir(name))
	if err != nil {
		cl.t.Fatalf("%s: %v", name, err)
	}
	return m
}

// scrapeSocket reads the Prometheus text of the node whose data
// directory is dir, as sample name (with its labels) -> value.
func scrapeSocket(ctx context.Context, dir string) (map[string]float64, error) {
	sock := adminapi.SocketPath(dir)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://petrel"+adminapi.PathMetrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", sock, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[cut+1:], 64); err == nil {
			out[line[:cut]] = v
		}
	}
	return out, sc.Err()
}

// stopAll stops every process with SIGTERM; each must exit 0.
func (cl *topicCluster) stopAll() {
	cl.t.Helper()
	var ps []*nodeproc.Proc
	for _, p := range cl.procs {
		ps = append(ps, p)
	}
	if err := nodeproc.StopAll(30*time.Second, ps...); err != nil {
		cl.t.Fatalf("stop: %v", err)
	}
}

// readSubscriptions opens each stopped node's data directory and returns
// the keys each durable subscription holds, in delivery order, keyed
// "<node>/<subscription>". Every message is compared whole with what its
// producer sent under its key.
func (cl *topicCluster) readSubscriptions() map[string][]string {
	cl.t.Helper()
	out := map[string][]string{}
	for name, n := range cl.nodes {
		if len(n.subs) == 0 {
			continue
		}
		cl.offline(name, func(node *petrel.Node) {
			for _, s := range n.subs {
				out[name+"/"+s[0]] = cl.drainSubscription(node, s[0], s[1])
			}
		})
	}
	return out
}

func (cl *topicCluster) drainSubscription(node *petrel.Node, sub, pattern string) []string {
	cl.t.Helper()
	c, err := node.Subscribe(context.Background(), pattern, petrel.SubscribeOptions{Name: sub, Durable: true})
	if err != nil {
		cl.t.Fatalf("%s: join %s: %v", node.Name(), sub, err)
	}
	defer c.Close()
	st, _ := node.QueueStat("sub:" + sub)
	var keys []string
	altered := 0
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			cl.t.Fatalf("%s: poll %s after %d: %v", node.Name(), sub, len(keys), err)
		}
		key := bench.KeyOf(d.Body)
		if diff := topicMessageDiffers(key, d); diff != "" {
			if altered++; altered <= 10 {
				cl.t.Errorf("%s/%s: message %d (%s) is not the one published: %s", node.Name(), sub, len(keys), key, diff)
			}
		}
		keys = append(keys, key)
	}
	if int64(len(keys)) != st.Depth {
		cl.t.Fatalf("%s: polled %d messages from %s, its depth is %d", node.Name(), len(keys), sub, st.Depth)
	}
	return keys
}

// topicMessageDiffers reports how d differs from what `bench agent
// produce --keys-log --size 64 --to orders.eu.created` publishes under key
// ("<prefix>-<priority>-<n>"), or "" if it does not.
func topicMessageDiffers(key string, d *petrel.Delivery) string {
	var diff []string
	parts := strings.Split(key, "-")
	if len(parts) != 3 {
		return fmt.Sprintf("key %q is not <prefix>-<priority>-<n>", key)
	}
	body := key + strings.Repeat(" ", max(crashBodySize-len(key), 1))
	if string(d.Body) != body {
		diff = append(diff, fmt.Sprintf("body %q, want %q", d.Body, body))
	}
	if want := atoiOr(parts[1], -1); int(d.Priority) != want {
		diff = append(diff, fmt.Sprintf("priority %d, want %d", d.Priority, want))
	}
	if d.Destination != topicName {
		diff = append(diff, fmt.Sprintf("destination %q, want %s", d.Destination, topicName))
	}
	if d.Kind != message.KindData || d.Data.DataType != "bench" {
		diff = append(diff, fmt.Sprintf("kind %v data %+v, want data of type bench", d.Kind, d.Data))
	}
	if v, ok := d.Properties.Get("sent_ns"); !ok || v.Type() != message.TypeInt64 || v.Int64() <= 0 {
		diff = append(diff, fmt.Sprintf("properties %v, want a sent_ns time", d.Properties))
	}
	return strings.Join(diff, "; ")
}

// tallySubscriptions checks each subscription against the producers'
// attempt and ok lines, logs one line of figures per subscription, and
// fails the test on anything lost, duplicated, unexpected or out of order.
func (cl *topicCluster) tallySubscriptions(got map[string][]string, producers ...string) {
	cl.t.Helper()
	var lines []string
	for _, p := range producers {
		lines = append(lines, cl.producerLines(p)...)
	}
	published := countPrefixed(lines, "ok ")
	for _, sub := range sortedKeys(got) {
		tally := tallyCrash(lines, got[sub])
		cl.t.Logf("subscription %s: published %d, delivered %d, duplicates %d, lost %d, unexpected %d, out of order %d",
			sub, published, tally.stored, tally.duplicated, tally.lost, tally.unexpected, tally.disorder)
		if tally.lost+tally.duplicated+tally.unexpected+tally.disorder > 0 {
			cl.t.Errorf("%s: custody broken; examples:\n%s", sub, strings.Join(tally.examples, "\n"))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// seededRand returns the test's random source, from PETREL_SEED when set.
func seededRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PETREL_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with PETREL_SEED)", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// TestCrashTopicsRelay runs a -> c -> b as three processes: a publishes
// to orders.eu.created (bench agent produce, priorities mixed, keys
// logged), c relays and has the durable subscription c1 to orders.#, b has
// two overlapping durable ones, b1 to orders.# and b2 to orders.eu.*.
// While a publishes, b is killed with SIGKILL every 300-1000ms and
// restarted on its data directory. Then each subscription holds every
// publish exactly once, in order per priority; and a and c each queued
// one copy per publish toward their next hop (petrel_topic_forwarded_total),
// however many subscriptions match behind it.
//
// By default a publishes 2,000 messages and b is killed at least twice.
// PETREL_LONG=1 publishes 20,000 and kills b at least five times:
//
//	PETREL_LONG=1 go test -run TestCrashTopicsRelay -v ./cmd/petrel
func TestCrashTopicsRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs without -short")
	}
	// The rate makes publishing last about 5s (20s), so that the kills,
	// one every 300-1000ms plus b's restart, land while a publishes.
	messages, rate, minKills := 2_000, 400, 2
	if os.Getenv("PETREL_LONG") == "1" {
		messages, rate, minKills = 20_000, 1000, 5
	}
	rng := seededRand(t)
	cl := newTopicCluster(t,
		topicNode{name: "a", neighbours: []string{"c"}, produce: []string{"--messages", strconv.Itoa(messages),
			"--size", strconv.Itoa(crashBodySize), "--rate", strconv.Itoa(rate), "--priorities", "mixed",
			"--keys-log", "--key-prefix", "a", "--wait-drained", "--wait-interest", "3"}},
		topicNode{name: "c", neighbours: []string{"a", "b"}, subs: [][2]string{{"c1", "orders.#"}}},
		topicNode{name: "b", neighbours: []string{"c"}, subs: [][2]string{{"b1", "orders.#"}, {"b2", "orders.eu.*"}}},
	)
	cl.prepare()
	for _, name := range []string{"b", "c", "a"} {
		cl.start(name)
	}
	kills, whilePublishing := 0, 0
	deadline := time.Now().Add(5 * time.Minute)
	for !cl.produced("a") || kills < minKills {
		if time.Now().After(deadline) {
			t.Fatalf("kill phase not done in 5m: %d kills, a produced: %v", kills, cl.produced("a"))
		}
		time.Sleep(time.Duration(300+rng.IntN(701)) * time.Millisecond)
		for name, p := range cl.procs {
			if !p.Running() {
				t.Fatal(p.ExitError(name + " ended by itself"))
			}
		}
		if !cl.produced("a") {
			whilePublishing++
		}
		cl.procs["b"].Kill()
		kills++
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // b stays down a while
		cl.start("b")
	}
	if whilePublishing == 0 {
		t.Fatalf("b was killed %d times, none while a published", kills)
	}
	cl.waitProduced("a")
	cl.settle()
	forwarded := map[string]float64{}
	for _, name := range []string{"a", "c"} {
		forwarded[name] = cl.metrics(name)["petrel_topic_forwarded_total"]
	}
	cl.stopAll()
	got := cl.readSubscriptions()
	t.Logf("b killed %d times (%d while a published); copies forwarded: a->c %v, c->b %v", kills, whilePublishing, forwarded["a"], forwarded["c"])
	if ok := countPrefixed(cl.producerLines("a"), "ok "); ok != messages {
		t.Errorf("%d publishes returned, want %d", ok, messages)
	}
	cl.tallySubscriptions(got, "a")
	// a and c were never restarted: their counters cover the whole run.
	for name, n := range forwarded {
		if n != float64(messages) {
			t.Errorf("%s queued %v copies toward its next hop, want %d: one per publish", name, n, messages)
		}
	}
}

// TestTopicsTriangleProcesses runs a triangle of three processes, each a
// neighbour of both others, each publishing (bench agent produce) and
// holding a durable subscription to orders.#. Each subscription gets
// every publish of all three exactly once, and no copy loops: each
// publish crosses 3 or 4 links (its origin sends it to both others, and
// each of them passes it to the third unless the third already had it),
// counted by petrel_topic_forwarded_total and by the links' acks.
func TestTopicsTriangleProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("the cross-process tests run without -short")
	}
	const perNode = 300
	names := []string{"a", "b", "c"}
	var nodes []topicNode
	for _, name := range names {
		var others []string
		for _, o := range names {
			if o != name {
				others = append(others, o)
			}
		}
		nodes = append(nodes, topicNode{name: name, neighbours: others, subs: [][2]string{{"s-" + name, topicSpace}},
			// Each learns both others' interest, from each of them: their
			// own and the third's, passed on.
			produce: []string{"--messages", strconv.Itoa(perNode), "--size", strconv.Itoa(crashBodySize),
				"--rate", "500", "--priorities", "mixed", "--keys-log", "--key-prefix", name,
				"--wait-drained", "--wait-interest", "4"}})
	}
	cl := newTopicCluster(t, nodes...)
	cl.prepare()
	for _, name := range names {
		cl.start(name)
	}
	cl.waitProduced(names...)
	cl.settle()
	var forwarded, acked float64
	for _, name := range names {
		m := cl.metrics(name)
		f := m["petrel_topic_forwarded_total"]
		st, err := readNodeStatus(cl.ctx, "", "", cl.dataDir(name), "")
		if err != nil {
			t.Fatal(err)
		}
		var a int64
		for _, l := range st.Links {
			if strings.HasPrefix(l.Queue, "_petrel.topics@") {
				a += l.Acked
			}
		}
		t.Logf("%s: forwarded %v copies; its topic links acked %d messages (copies and interest)", name, f, a)
		// Its own publishes to both others, and at most one copy of each
		// other node's publish to the third.
		if f < 2*perNode || f > 4*perNode {
			t.Errorf("%s forwarded %v copies, want %d to %d", name, f, 2*perNode, 4*perNode)
		}
		forwarded += f
		acked += float64(a)
	}
	pub := float64(len(names) * perNode)
	t.Logf("triangle: %v publishes crossed %v links (%.2f per publish; bounds 3 to 4); the links carried %v messages, %v of them interest",
		pub, forwarded, forwarded/pub, acked, acked-forwarded)
	if forwarded < 3*pub || forwarded > 4*pub {
		t.Errorf("the publishes crossed %v links, want %v to %v: 3 or 4 per publish", forwarded, 3*pub, 4*pub)
	}
	// What crossed the links beyond the copies is interest: each node's
	// announcement and the third's, to each neighbour, at each start (and
	// once more each as interest learned is passed on); never a copy
	// going round.
	if acked < forwarded || acked-forwarded > 4*6 {
		t.Errorf("the links carried %v messages for %v copies: %v of interest, want at most 24", acked, forwarded, acked-forwarded)
	}
	cl.stopAll()
	cl.tallySubscriptions(cl.readSubscriptions(), names...)
}

// TestTopicsDeletedWhileDown: b's durable subscription b1 is deleted
// while b is down, and a drops the copies that waited for it. a cannot
// reach b at all (its connector for b names a port nothing listens on),
// while b reaches a: a learns b1's interest, publishes, and its copies
// wait in its send queue toward b. b is killed; b1 is deleted on b's data
// directory, which queues the withdrawal toward a; b starts again and
// sends it. a then drops what waited for b1 without sending any of it,
// and counts them in petrel_topic_pruned_total{reason="unsubscribed"}.
func TestTopicsDeletedWhileDown(t *testing.T) {
	if testing.Short() {
		t.Skip("the cross-process tests run without -short")
	}
	const messages = 50
	cl := newTopicCluster(t,
		topicNode{name: "a", neighbours: []string{"b"}, produce: []string{"--messages", strconv.Itoa(messages),
			"--size", strconv.Itoa(crashBodySize), "--keys-log", "--key-prefix", "a", "--wait-interest", "1"}},
		topicNode{name: "b", neighbours: []string{"a"}, subs: [][2]string{{"b1", topicSpace}}},
	)
	unreachable, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cl.connectors["a"] = map[string]string{"b": "tcp://127.0.0.1:" + strconv.Itoa(unreachable)}
	cl.prepare()
	cl.start("b")
	cl.start("a")
	ctx, cancel := context.WithTimeout(cl.ctx, time.Minute)
	defer cancel()
	var prod struct{ Count int }
	if err := cl.procs["a"].WaitEvent(ctx, "produced", &prod); err != nil {
		t.Fatal(err)
	}
	towardB := func() (petrel.LinkStatus, map[string]float64) {
		st, err := readNodeStatus(cl.ctx, "", "", cl.dataDir("a"), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range st.Links {
			if l.Queue == "_petrel.topics@b" {
				return l, cl.metrics("a")
			}
		}
		t.Fatalf("a has no topic link toward b: %+v", st.Links)
		return petrel.LinkStatus{}, nil
	}
	if l, _ := towardB(); l.Depth != messages || l.Acked != 0 {
		t.Fatalf("a's link toward b: depth %d, acked %d; want the %d publishes waiting", l.Depth, l.Acked, messages)
	}
	cl.procs["b"].Kill()
	cl.offline("b", func(node *petrel.Node) {
		if err := node.Unsubscribe(context.Background(), "b1"); err != nil {
			t.Fatalf("delete b1: %v", err)
		}
	}, "a")
	cl.start("b")
	ctx, cancel = context.WithTimeout(cl.ctx, 30*time.Second)
	defer cancel()
	var last petrel.LinkStatus
	var m map[string]float64
	for {
		if last, m = towardB(); last.Depth == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a still holds %d copies for b's deleted subscription (acked %d); a's metrics: interest %v, forwarded %v",
				last.Depth, last.Acked, m["petrel_topic_interest"], m["petrel_topic_forwarded_total"])
		case <-time.After(50 * time.Millisecond):
		}
	}
	if last.Acked != 0 || last.InFlight != 0 {
		t.Fatalf("a's link toward b acked %d and has %d in flight: it never reached b, so nothing was sent", last.Acked, last.InFlight)
	}
	if m["petrel_topic_interest"] != 0 {
		t.Fatalf("a still holds %v pieces of interest after b1 was deleted", m["petrel_topic_interest"])
	}
	if got := m[`petrel_topic_pruned_total{reason="unsubscribed"}`]; got != messages {
		t.Fatalf("a counted %v copies dropped for the withdrawn interest, want %d; its topic metrics: %v", got, messages, topicMetrics(m))
	}
	t.Logf("a dropped the %d copies that waited for b's deleted subscription; its topic metrics: %v", messages, topicMetrics(m))
	cl.stopAll()
}

// topicMetrics keeps the petrel_topic_ samples of m, for a log line.
func topicMetrics(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "petrel_topic_") {
			out[k] = v
		}
	}
	return out
}

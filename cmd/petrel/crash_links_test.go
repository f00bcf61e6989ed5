package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/bench"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/message"
)

// crashPlan sizes TestCrashAcrossProcesses.
type crashPlan struct {
	messages int
	// rate paces the producer, so that traffic flows while the kills come.
	rate int
	// minKills is how many times each node is killed at least.
	minKills int
	// within bounds the kill phase.
	within time.Duration
}

// TestCrashAcrossProcesses runs a -> c -> b as three petrel processes: a
// produces (bench agent produce, keys logged), c relays (petrel node), b
// receives (petrel node). While messages flow, every 300-1500ms a random
// node is killed with SIGKILL and restarted on the same configuration and
// data directory; a comes back with a new key prefix and the messages it
// still owes. Then the three run undisturbed until a's and c's send queues
// are empty, stop cleanly, and b's queue is read back: every send that
// returned is stored exactly once, nothing that was never sent is stored,
// and per producer incarnation and priority the keys come out in send
// order.
//
// By default it sends 10,000 messages and kills each node at least twice.
// PETREL_LONG=1 sends 100,000 and kills each node at least five times:
//
//	PETREL_LONG=1 go test -run TestCrashAcrossProcesses -v ./cmd/petrel
func TestCrashAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs without -short")
	}
	plan := crashPlan{messages: 10_000, rate: 1500, minKills: 2, within: 3 * time.Minute}
	if os.Getenv("PETREL_LONG") == "1" {
		plan = crashPlan{messages: 100_000, rate: 5000, minKills: 5, within: 15 * time.Minute}
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PETREL_SEED"), 10, 64); err == nil {
		seed = s // replay the kill schedule of a logged run
	}
	t.Logf("seed %d (replay with PETREL_SEED), %d messages, each node killed at least %d times", seed, plan.messages, plan.minKills)
	cl := newCrashCluster(t, plan)
	for _, name := range []string{"b", "c", "a"} {
		cl.start(name)
	}
	kills := cl.killLoop(rand.New(rand.NewPCG(seed, seed)))
	cl.settle()
	cl.stopAll()
	stored := readCrashQueue(t, cl.dataDir("b"))
	tally := tallyCrash(cl.aLines(), stored)
	t.Logf("crash summary: messages %d, a incarnations %d, kills a=%d b=%d c=%d (%d while a produced); attempted %d, ok %d, stored %d; lost %d, duplicated %d, unexpected %d, out of order %d",
		plan.messages, len(cl.incarnations), kills["a"], kills["b"], kills["c"], kills["producing"],
		tally.attempted, tally.ok, tally.stored, tally.lost, tally.duplicated, tally.unexpected, tally.disorder)
	if tally.ok != plan.messages {
		t.Errorf("%d sends returned, want %d", tally.ok, plan.messages)
	}
	if tally.lost+tally.duplicated+tally.unexpected+tally.disorder > 0 {
		t.Errorf("custody broken; examples:\n%s", strings.Join(tally.examples, "\n"))
	}
}

// crashCluster is the three nodes of the crash test and their history.
type crashCluster struct {
	t     *testing.T
	plan  crashPlan
	dir   string
	ctx   context.Context
	ports map[string]int
	procs map[string]*nodeproc.Proc
	// incarnations are a's processes, in order; incarnation i's keys start
	// with "i<i>-".
	incarnations []*nodeproc.Proc
}

func newCrashCluster(t *testing.T, plan crashPlan) *crashCluster {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cl := &crashCluster{t: t, plan: plan, dir: dir, ctx: ctx, ports: map[string]int{}, procs: map[string]*nodeproc.Proc{}}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		cancel()
		for _, p := range cl.procs {
			p.Kill()
		}
	})
	fast := func(f nodeproc.NodeFile) nodeproc.NodeFile {
		f.DataDir = cl.dataDir(f.Name)
		f.ReconnectMin, f.ReconnectMax = 10*time.Millisecond, 200*time.Millisecond
		return f
	}
	for _, name := range []string{"b", "c"} {
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cl.ports[name] = port
	}
	files := []nodeproc.NodeFile{
		fast(nodeproc.NodeFile{Name: "a", Nodes: [][2]string{{"c", cl.connector("c")}}, Routes: [][2]string{{"b", "c"}}}),
		fast(nodeproc.NodeFile{Name: "c", Listen: cl.listen("c"), Nodes: [][2]string{{"b", cl.connector("b")}}, Relay: []string{"crash"}}),
		fast(nodeproc.NodeFile{Name: "b", Listen: cl.listen("b"), Receive: []string{"crash"}}),
	}
	for _, f := range files {
		if err := f.Write(cl.configPath(f.Name)); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func (cl *crashCluster) dataDir(name string) string    { return filepath.Join(cl.dir, name) }
func (cl *crashCluster) configPath(name string) string { return filepath.Join(cl.dir, name+".yaml") }
func (cl *crashCluster) listen(name string) string {
	return "127.0.0.1:" + strconv.Itoa(cl.ports[name])
}
func (cl *crashCluster) connector(name string) string { return "tcp://" + cl.listen(name) }

// start starts node name and waits until it is ready; a starts with the
// messages that no earlier incarnation got an ok for.
func (cl *crashCluster) start(name string) {
	cl.t.Helper()
	args := []string{"node", "-c", cl.configPath(name)}
	if name == "a" {
		owed := cl.plan.messages - countPrefixed(cl.aLines(), "ok ")
		args = []string{"bench", "agent", "produce", "-c", cl.configPath("a"), "--to", "crash@b",
			"--messages", strconv.Itoa(owed), "--size", "64", "--rate", strconv.Itoa(cl.plan.rate),
			"--priorities", "mixed", "--keys-log", "--key-prefix", fmt.Sprintf("i%d", len(cl.incarnations)),
			"--wait-drained"}
	}
	// A port may be briefly taken by someone else: try again, same port.
	p := startProc(cl.t, cl.ctx, cl.dir, name, args...)
	cl.procs[name] = p
	if name == "a" {
		cl.incarnations = append(cl.incarnations, p)
	}
}

// killLoop kills a random node every 300-1500ms and restarts it, until a
// has produced everything and each node was killed plan.minKills times.
// Victims come in rounds, each a random order of the three, so that the
// kills are spread evenly and most land while a still produces (the plan's
// rate makes production last about minKills rounds). A node that ended by
// itself fails the test. It returns the kills per node, and under
// "producing" those that came before a had an ok for every message.
func (cl *crashCluster) killLoop(rng *rand.Rand) map[string]int {
	cl.t.Helper()
	kills := map[string]int{}
	deadline := time.Now().Add(cl.plan.within)
	names := []string{"a", "b", "c"}
	var round []int
	for !cl.aProduced() || min(kills["a"], kills["b"], kills["c"]) < cl.plan.minKills {
		if time.Now().After(deadline) {
			cl.t.Fatalf("kill phase not done within %v: kills %v, a produced: %v", cl.plan.within, kills, cl.aProduced())
		}
		time.Sleep(time.Duration(300+rng.IntN(1201)) * time.Millisecond)
		for _, n := range names {
			if !cl.procs[n].Running() {
				cl.t.Fatal(cl.procs[n].ExitError("ended by itself"))
			}
		}
		if len(round) == 0 {
			round = rng.Perm(len(names))
		}
		victim := names[round[0]]
		round = round[1:]
		if !cl.aProduced() {
			kills["producing"]++
		}
		cl.procs[victim].Kill()
		kills[victim]++
		cl.start(victim)
	}
	return kills
}

// aProduced reports whether the running a printed its produced event: it
// has an ok for every message.
func (cl *crashCluster) aProduced() bool {
	return countPrefixed(cl.procs["a"].Lines(), `{"event":"produced"`) > 0
}

// settle waits, undisturbed, until a and then c have empty send queues:
// everything a ever stored is then committed at b.
func (cl *crashCluster) settle() {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(cl.ctx, 3*time.Minute)
	defer cancel()
	var dr bench.DrainedEvent
	if err := cl.procs["a"].WaitEvent(ctx, "drained", &dr); err != nil {
		cl.t.Fatalf("a's send queue did not drain: %v", err)
	}
	for _, name := range []string{"a", "c"} {
		if err := waitLinksEmpty(ctx, cl.dataDir(name)); err != nil {
			cl.t.Fatalf("%s: %v", name, err)
		}
	}
}

// waitLinksEmpty polls a running node's status until every send queue is
// empty, nothing in flight.
func waitLinksEmpty(ctx context.Context, dataDir string) error {
	var last petrel.Status
	for {
		st, err := readNodeStatus(ctx, "", "", dataDir, "")
		if err == nil {
			last = st
			empty := true
			for _, l := range st.Links {
				empty = empty && l.Depth == 0 && l.InFlight == 0
			}
			if empty {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("send queues not empty: %w; last links %+v (read error %v)", ctx.Err(), last.Links, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stopAll stops the three with SIGTERM; each must exit 0.
func (cl *crashCluster) stopAll() {
	cl.t.Helper()
	if err := nodeproc.StopAll(30*time.Second, cl.procs["a"], cl.procs["c"], cl.procs["b"]); err != nil {
		cl.t.Fatalf("stop: %v", err)
	}
}

// aLines returns every line that every incarnation of a printed.
func (cl *crashCluster) aLines() []string {
	var all []string
	for _, p := range cl.incarnations {
		all = append(all, p.Lines()...)
	}
	return all
}

func countPrefixed(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// readCrashQueue opens b's stopped node and returns the keys in its crash
// queue, in delivery order. Each message is compared whole with what a
// sent under its key (crashMessageDiffers); a message that differs fails
// the test.
func readCrashQueue(t *testing.T, dataDir string) []string {
	t.Helper()
	node, err := petrel.Open(context.Background(), petrel.Config{Name: "b", DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open b's data: %v", err)
	}
	defer node.Close()
	c, err := node.Consumer("crash")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := node.QueueStat("crash")
	var keys []string
	altered := 0
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			t.Fatalf("poll b's crash queue after %d: %v", len(keys), err)
		}
		key := bench.KeyOf(d.Body)
		if diff := crashMessageDiffers(key, d); diff != "" {
			altered++
			if altered <= 20 {
				t.Errorf("b's message %d (%s) is not the one a sent: %s", len(keys), key, diff)
			}
		}
		keys = append(keys, key)
	}
	if altered > 0 {
		t.Errorf("%d of %d messages at b differ from what a sent", altered, len(keys))
	}
	if int64(len(keys)) != st.Depth {
		t.Fatalf("polled %d messages from b's crash queue, its depth is %d", len(keys), st.Depth)
	}
	return keys
}

// crashBodySize is the --size a produces with.
const crashBodySize = 64

// crashMessageDiffers reports how d differs from the message that bench
// agent produce sends under key ("<prefix>-<priority>-<n>"), or "" if it
// does not: the body (the key padded with spaces to crashBodySize), the
// destination, kind, priority, data type, and the one property, sent_ns.
func crashMessageDiffers(key string, d *petrel.Delivery) string {
	var diff []string
	parts := strings.Split(key, "-")
	if len(parts) != 3 {
		return fmt.Sprintf("key %q is not <prefix>-<priority>-<n>", key)
	}
	body := []byte(key + strings.Repeat(" ", max(crashBodySize-len(key), 1)))
	if string(d.Body) != string(body) {
		diff = append(diff, fmt.Sprintf("body %q, want %q", d.Body, body))
	}
	if want := atoiOr(parts[1], -1); int(d.Priority) != want {
		diff = append(diff, fmt.Sprintf("priority %d, want %d", d.Priority, want))
	}
	if d.Destination != "crash@b" {
		diff = append(diff, fmt.Sprintf("destination %q, want crash@b", d.Destination))
	}
	if d.Kind != message.KindData || d.Data != (message.DataProps{DataType: "bench"}) {
		diff = append(diff, fmt.Sprintf("kind %v data %+v, want data of type bench", d.Kind, d.Data))
	}
	if v, ok := d.Properties.Get("sent_ns"); len(d.Properties) != 1 || !ok || v.Type() != message.TypeInt64 || v.Int64() <= 0 {
		diff = append(diff, fmt.Sprintf("properties %v, want one sent_ns time", d.Properties))
	}
	return strings.Join(diff, "; ")
}

// crashTally is what the crash test checks.
type crashTally struct {
	attempted, ok, stored                  int
	lost, duplicated, unexpected, disorder int
	examples                               []string
}

func (c *crashTally) example(format string, args ...any) {
	if len(c.examples) < 20 {
		c.examples = append(c.examples, fmt.Sprintf(format, args...))
	}
}

// tallyCrash compares a's attempt and ok lines with the keys stored at b,
// in the order b delivers them: highest priority first, FIFO within one.
func tallyCrash(aLines, stored []string) crashTally {
	attempted, oks := map[string]bool{}, map[string]bool{}
	for _, l := range aLines {
		if k, ok := strings.CutPrefix(l, "attempt "); ok {
			attempted[k] = true
		} else if k, ok := strings.CutPrefix(l, "ok "); ok {
			oks[k] = true
		}
	}
	tally := crashTally{attempted: len(attempted), ok: len(oks), stored: len(stored)}
	count := map[string]int{}
	last := map[string]int{} // "<prefix>-<priority>" -> last n seen
	for i, k := range stored {
		count[k]++
		if count[k] == 2 {
			tally.duplicated++
			tally.example("duplicated: %s (again at position %d)", k, i)
		}
		if !attempted[k] {
			tally.unexpected++
			tally.example("unexpected: %s was never attempted", k)
			continue
		}
		cut := strings.LastIndexByte(k, '-')
		stream, n := k[:cut], atoiOr(k[cut+1:], -1)
		if prev, seen := last[stream]; seen && n <= prev {
			tally.disorder++
			tally.example("out of order: %s stored after %s-%d (position %d)", k, stream, prev, i)
		}
		last[stream] = max(last[stream], n)
	}
	keys := slices.Sorted(maps.Keys(oks))
	for _, k := range keys {
		if count[k] == 0 {
			tally.lost++
			tally.example("lost: %s was ok'd and is not stored", k)
		}
	}
	return tally
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func TestTallyCrash(t *testing.T) {
	lines := []string{"attempt i0-4-0", "attempt i0-5-1", "ok i0-4-0", "attempt i0-4-2", "ok i0-4-2", "ok i0-5-1", "attempt i0-4-3"}
	got := tallyCrash(lines, []string{"i0-5-1", "i0-4-2", "i0-4-0", "i0-4-2", "i1-4-0"})
	want := crashTally{attempted: 4, ok: 3, stored: 5, duplicated: 1, unexpected: 1, disorder: 2}
	got.examples = nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	clean := tallyCrash(lines, []string{"i0-5-1", "i0-4-0", "i0-4-2"})
	if clean.lost+clean.duplicated+clean.unexpected+clean.disorder != 0 {
		t.Errorf("a clean run tallied %+v", clean)
	}
	lost := tallyCrash(lines, []string{"i0-4-0", "i0-4-2", "i0-4-3"})
	if lost.lost != 1 {
		t.Errorf("a lost i0-5-1 tallied %+v", lost)
	}
}

func TestCrashMessageDiffers(t *testing.T) {
	good := func() *petrel.Delivery {
		m := &message.Message{Destination: "crash@b", Kind: message.KindData, Priority: 4,
			Data: message.DataProps{DataType: "bench"}, Body: []byte("i0-4-12" + strings.Repeat(" ", 64-7))}
		m.Properties.Set("sent_ns", message.Int64(1))
		return &petrel.Delivery{Message: m}
	}
	if diff := crashMessageDiffers("i0-4-12", good()); diff != "" {
		t.Fatalf("the message sent differs: %s", diff)
	}
	for name, spoil := range map[string]func(d *petrel.Delivery){
		"body tail":   func(d *petrel.Delivery) { d.Body[40] = 'x' },
		"body length": func(d *petrel.Delivery) { d.Body = d.Body[:63] },
		"priority":    func(d *petrel.Delivery) { d.Priority = 5 },
		"destination": func(d *petrel.Delivery) { d.Destination = "crash@c" },
		"data type":   func(d *petrel.Delivery) { d.Data.DataType = "" },
		"property":    func(d *petrel.Delivery) { d.Properties.Set("extra", message.Bool(true)) },
		"kind":        func(d *petrel.Delivery) { d.Kind = message.KindCommand },
	} {
		d := good()
		spoil(d)
		if crashMessageDiffers("i0-4-12", d) == "" {
			t.Errorf("a spoilt %s went unnoticed", name)
		}
	}
}

// startProc starts the petrel process name with args, its stderr in
// dir/<name>.stderr, and waits up to a minute for its ready line; a port
// briefly taken by someone else is tried again, the same port. It fails
// the test if the process does not come up.
func startProc(t *testing.T, ctx context.Context, dir, name string, args ...string) *nodeproc.Proc {
	t.Helper()
	p, _, err := nodeproc.StartRetryingPort(ctx, 20, func() (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
		p, err := nodeproc.Start(ctx, name, petrelBin, filepath.Join(dir, name+".stderr"), args...)
		if err != nil {
			return nil, nodeproc.ReadyInfo{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		info, err := p.WaitReady(ctx)
		if err != nil {
			p.Kill()
		}
		return p, info, err
	})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return p
}

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/petrelmq/petrel/internal/chaos"
	"github.com/petrelmq/petrel/internal/nodeproc"
)

// The addresses of the chaos traffic: each node's queue, the topic space
// and the topic every node publishes to, and each node's durable
// subscription to it.
const (
	chaosQueue   = "chaos"
	chaosSpace   = "events.#"
	chaosTopic   = "events.all"
	chaosSubName = "chaos"
)

// chaosCluster is the nodes of a chaos run, the proxies between them, and
// every process each node ran.
type chaosCluster struct {
	o     chaosOptions
	ctx   context.Context
	dir   string
	log   io.Writer
	names []string
	ports map[string]int
	net   *chaos.Net
	procs map[string]*nodeproc.Proc
	// agents are every produce agent each node ran, in order; incarnation i
	// of node n prefixes its keys "n.i".
	agents  map[string][]*nodeproc.Proc
	crashed int
	errs    []string
}

// runChaos runs the whole experiment: traffic under faults, settling, and
// the check of the stores.
func runChaos(ctx context.Context, o chaosOptions, log io.Writer) (*chaosResult, error) {
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(log, "chaos: seed %d (replay the fault schedule with --seed)\n", o.Seed)
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "petrel-chaos-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The nodes get absolute paths: a received file's path is checked
	// from here.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := &chaosCluster{o: o, ctx: ctx, dir: dir, log: log, ports: map[string]int{}, net: chaos.NewNet(),
		procs: map[string]*nodeproc.Proc{}, agents: map[string][]*nodeproc.Proc{}}
	defer cl.net.Close()
	defer cl.killAll()
	for i := range o.Nodes {
		cl.names = append(cl.names, "n"+strconv.Itoa(i))
	}
	if err := cl.setup(); err != nil {
		return nil, err
	}
	res := &chaosResult{Seed: o.Seed, Nodes: o.Nodes, Duration: o.Duration.String(), Rate: o.Rate}
	for _, n := range cl.names {
		if err := cl.startAgent(n); err != nil {
			return nil, err
		}
	}
	if err := cl.faults(rand.New(rand.NewPCG(o.Seed, o.Seed)), res); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "chaos: faults done (%d kills, %d flaps, %d partitions); settling\n", res.Kills, res.Flaps, res.Parts)
	settle := time.Now()
	if err := cl.settle(); err != nil {
		return nil, err
	}
	res.SettleFor = time.Since(settle).Round(time.Millisecond).String()
	report, attempted, err := cl.check()
	if err != nil {
		return nil, err
	}
	res.Check, res.Attempted, res.Crashed, res.Errors = report, attempted, cl.crashed, cl.errs
	res.Pass = report.Total.Bad() == 0 && cl.crashed == 0 && report.Total.Ok > 0
	return res, nil
}

// setup picks the ports, starts a proxy for every directed link and writes
// the configuration files: node i dials node j through proxy i->j.
func (cl *chaosCluster) setup() error {
	proxyPort := map[[2]string]int{}
	for _, a := range cl.names {
		p, err := nodeproc.FreePort()
		if err != nil {
			return err
		}
		cl.ports[a] = p
		for _, b := range cl.names {
			if a != b {
				if proxyPort[[2]string{a, b}], err = nodeproc.FreePort(); err != nil {
					return err
				}
			}
		}
	}
	for _, a := range cl.names {
		f := nodeproc.NodeFile{Name: a, DataDir: filepath.Join(cl.dir, a), Listen: local(cl.ports[a]),
			Receive: []string{chaosQueue}, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 500 * time.Millisecond,
			Extra: fmt.Sprintf("topics:\n  - pattern: %q\n", chaosSpace)}
		for _, b := range cl.names {
			if a == b {
				continue
			}
			listen := local(proxyPort[[2]string{a, b}])
			if err := cl.net.Add(a, b, listen, local(cl.ports[b])); err != nil {
				return err
			}
			f.Nodes = append(f.Nodes, [2]string{b, "tcp://" + listen})
		}
		if err := f.Write(cl.configPath(a)); err != nil {
			return err
		}
	}
	return nil
}

func local(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func (cl *chaosCluster) configPath(name string) string { return filepath.Join(cl.dir, name+".yaml") }
func (cl *chaosCluster) dataDir(name string) string    { return filepath.Join(cl.dir, name) }

// next is the node whose queue name's producer sends to.
func (cl *chaosCluster) next(name string) string {
	for i, n := range cl.names {
		if n == name {
			return cl.names[(i+1)%len(cl.names)]
		}
	}
	return ""
}

// startAgent starts a new incarnation of name's producer and waits until
// its node is open.
func (cl *chaosCluster) startAgent(name string) error {
	inc := len(cl.agents[name])
	args := []string{"bench", "agent", "produce", "-c", cl.configPath(name),
		"--to", chaosQueue + "@" + cl.next(name), "--messages", "1000000000", "--size", strconv.Itoa(chaosBodySize),
		"--rate", strconv.FormatFloat(cl.o.Rate, 'f', -1, 64), "--priorities", "mixed",
		"--keys-log", "--key-prefix", fmt.Sprintf("%s.%d", name, inc),
		"--topic", chaosTopic, "--topic-every", "3", "--subscribe", chaosSubName + "=" + chaosSpace,
		"--wait-interest-of", strings.Join(cl.names, ","), "--direct-interest"}
	if cl.o.FileEvery > 0 {
		files := filepath.Join(cl.dir, name+"-outgoing")
		if err := os.MkdirAll(files, 0o755); err != nil {
			return err
		}
		args = append(args, "--file-every", strconv.Itoa(cl.o.FileEvery), "--file-size", strconv.Itoa(cl.o.FileSize), "--file-dir", files)
	}
	p, err := cl.start(name, args)
	if err != nil {
		return err
	}
	cl.agents[name] = append(cl.agents[name], p)
	return nil
}

// start starts a process of node name with args, retrying while its port
// is taken, and waits for its ready line.
func (cl *chaosCluster) start(name string, args []string) (*nodeproc.Proc, error) {
	p, _, err := nodeproc.StartRetryingPort(cl.ctx, 30, func() (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
		p, err := nodeproc.Start(cl.ctx, name, cl.o.Exe, filepath.Join(cl.dir, name+".stderr"), args...)
		if err != nil {
			return nil, nodeproc.ReadyInfo{}, err
		}
		ctx, cancel := context.WithTimeout(cl.ctx, time.Minute)
		defer cancel()
		info, err := p.WaitReady(ctx)
		if err != nil {
			p.Kill()
		}
		return p, info, err
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cl.procs[name] = p
	return p, nil
}

// faults runs the traffic for the run's duration, with the faults on
// their schedules. A node that ended by itself is counted, noted and
// restarted.
func (cl *chaosCluster) faults(rng *rand.Rand, res *chaosResult) error {
	start := time.Now()
	end := start.Add(cl.o.Duration)
	nextKill, nextFlap, nextPart := start.Add(cl.o.KillEvery), start.Add(cl.o.FlapEvery), start.Add(cl.o.PartEvery)
	lastReport := start
	for time.Now().Before(end) {
		if err := sleepCtx(cl.ctx, 50*time.Millisecond); err != nil {
			return err
		}
		for _, n := range cl.names {
			if !cl.procs[n].Running() {
				cl.crashed++
				cl.errs = append(cl.errs, cl.procs[n].ExitError("ended by itself").Error())
				if err := cl.startAgent(n); err != nil {
					return err
				}
			}
		}
		now := time.Now()
		if cl.o.KillEvery > 0 && !now.Before(nextKill) {
			victim := cl.names[rng.IntN(len(cl.names))]
			cl.procs[victim].Kill()
			res.Kills++
			if err := cl.startAgent(victim); err != nil {
				return err
			}
			nextKill = now.Add(cl.o.KillEvery)
		}
		if cl.o.FlapEvery > 0 && !now.Before(nextFlap) {
			n := len(cl.names)
			i := rng.IntN(n)
			a, b := cl.names[i], cl.names[(i+1+rng.IntN(n-1))%n]
			if cl.net.Flap(a, b, time.Duration(200+rng.IntN(1801))*time.Millisecond) {
				res.Flaps++
			}
			nextFlap = now.Add(cl.o.FlapEvery)
		}
		if cl.o.PartEvery > 0 && !now.Before(nextPart) {
			cl.net.Partition(cl.names[rng.IntN(len(cl.names))], time.Duration(1000+rng.IntN(4001))*time.Millisecond)
			res.Parts++
			nextPart = now.Add(cl.o.PartEvery)
		}
		if now.Sub(lastReport) >= time.Minute {
			lastReport = now
			fmt.Fprintf(cl.log, "chaos: %v of %v; %d kills, %d flaps, %d partitions, %d crashed\n",
				now.Sub(start).Round(time.Second), cl.o.Duration, res.Kills, res.Flaps, res.Parts, cl.crashed)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle ends the faults, kills every producer a last time, restarts the
// nodes as plain `petrel node`, waits until nothing is left to move, and
// stops them cleanly.
func (cl *chaosCluster) settle() error {
	cl.net.Heal()
	for _, n := range cl.names {
		cl.procs[n].Kill()
	}
	for _, n := range cl.names {
		if _, err := cl.start(n, []string{"node", "-c", cl.configPath(n)}); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(cl.ctx, 15*time.Minute)
	defer cancel()
	for quiet := 0; quiet < 2; {
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("the nodes did not settle: %w", err)
		}
		if cl.quiet(ctx) {
			quiet++
		} else {
			quiet = 0
		}
	}
	var ps []*nodeproc.Proc
	for _, n := range cl.names {
		ps = append(ps, cl.procs[n])
	}
	return nodeproc.StopAll(time.Minute, ps...)
}

// quiet reports whether every node's send queues and topic inbox are
// empty, nothing in flight.
func (cl *chaosCluster) quiet(ctx context.Context) bool {
	for _, n := range cl.names {
		st, err := readNodeStatus(ctx, "", "", cl.dataDir(n), "")
		if err != nil {
			return false
		}
		for _, l := range st.Links {
			if l.Depth > 0 || l.InFlight > 0 {
				return false
			}
		}
		for _, q := range st.Queues {
			if q.Name == "topic:inbox" && q.Depth > 0 {
				return false
			}
		}
	}
	return true
}

// killAll kills whatever still runs.
func (cl *chaosCluster) killAll() {
	for _, p := range cl.procs {
		if p.Running() {
			p.Kill()
		}
	}
}

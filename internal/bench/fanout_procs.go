package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// `bench fanout --nodes 3`: three node processes in a line, n1 - n2 - n3,
// each a `bench agent fanout`. The subscriptions are spread over the
// three, subscription i on node i mod 3; n1 is also the publisher, and n2
// relays to n3 what n3's subscriptions want. The anycast baseline is the
// same publisher, in n1, to one anycast address of n1 with one consumer,
// just before the fan-out.

// fanoutNodes are the names of the three nodes, in line order.
var fanoutNodes = []string{"n1", "n2", "n3"}

// FanoutNodeFigures are one node's figures in a --nodes 3 run.
type FanoutNodeFigures struct {
	Node        string  `json:"node"`
	Pid         int     `json:"pid"`
	Subscribers int     `json:"subscribers"`
	Delivered   int64   `json:"delivered"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
}

// runFanoutProcs runs the three processes and returns the result.
func runFanoutProcs(ctx context.Context, r *procRun, o FanoutOptions) (*FanoutResult, error) {
	ports := map[string]int{}
	for _, name := range fanoutNodes {
		port, err := nodeproc.FreePort()
		if err != nil {
			return nil, err
		}
		ports[name] = port
	}
	connector := func(name string) string {
		return "tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[name]))
	}
	neighbours := map[string][]string{"n1": {"n2"}, "n2": {"n1", "n3"}, "n3": {"n2"}}
	subs := map[string]int{}
	for i := range o.Subscribers {
		subs[fanoutNodes[i%3]]++
	}
	// n1 learns n2's own interest and n3's through n2, for those that
	// subscribe at all.
	interest := 0
	for _, name := range fanoutNodes[1:] {
		if subs[name] > 0 {
			interest++
		}
	}
	procs := map[string]*nodeproc.Proc{}
	for _, name := range []string{"n3", "n2", "n1"} {
		p, _, err := r.startListening(ctx, name, ports[name], func(listen string) ([]string, error) {
			f := nodeproc.NodeFile{Name: name, Listen: listen, Extra: fmt.Sprintf("topics:\n  - pattern: %q\n", FanoutSpace)}
			for _, nb := range neighbours[name] {
				f.Nodes = append(f.Nodes, [2]string{nb, connector(nb)})
			}
			cfg, err := r.fileFor(f)
			args := []string{"bench", "agent", "fanout", "-c", cfg, "--subscribers", strconv.Itoa(subs[name]),
				"--expect", strconv.Itoa(o.Messages), "--batch", strconv.Itoa(o.Batch), "--durable=" + strconv.FormatBool(o.Durable)}
			if name == "n1" {
				args = append(args, "--publish", strconv.Itoa(o.Messages), "--size", strconv.Itoa(o.Size),
					"--producers", strconv.Itoa(o.Producers), "--window", strconv.Itoa(o.Window),
					"--wait-interest", strconv.Itoa(interest))
			}
			return args, err
		})
		if err != nil {
			return nil, err
		}
		procs[name] = p
	}
	fmt.Fprintf(r.progress, "baseline, then %d messages to %q, subscriptions n1 %d, n2 %d, n3 %d...\n",
		o.Messages, FanoutTopic, subs["n1"], subs["n2"], subs["n3"])
	var pub fanoutPublishedEvent
	if err := procs["n1"].WaitEvent(ctx, "fanout-published", &pub); err != nil {
		return nil, err
	}
	res := o.result([]FanoutRound{{BaselineAnycastMsgsPerSec: pub.BaselineMsgsPerSec,
		PublishMsgsPerSec: rate(int64(o.Messages), time.Duration(pub.DurableNs-pub.StartNs))}}, 0, nil)
	var last int64
	reported := map[string]float64{}
	for _, name := range fanoutNodes {
		var ev fanoutConsumedEvent
		if err := procs[name].WaitEvent(ctx, "fanout-consumed", &ev); err != nil {
			return nil, err
		}
		reported[name] = ev.PeakRSSMB
		res.PerNode = append(res.PerNode, FanoutNodeFigures{Node: name, Pid: procs[name].Pid(), Subscribers: subs[name], Delivered: ev.Delivered,
			P50ms: ev.P50ms, P99ms: ev.P99ms})
		res.Delivered += ev.Delivered
		if subs[name] > 0 {
			last = max(last, ev.LastNs)
			// The worst node's percentiles: copies that crossed the relay
			// are the slowest, and the figure is for them.
			res.P50ms, res.P99ms, res.MaxMs = max(res.P50ms, ev.P50ms), max(res.P99ms, ev.P99ms), max(res.MaxMs, ev.MaxMs)
		}
	}
	rss := r.rss(reported)
	res.PeakRSSMB = 0
	for i := range res.PerNode {
		res.PerNode[i].PeakRSSMB = rss[res.PerNode[i].Node]
		res.PeakRSSMB = max(res.PeakRSSMB, res.PerNode[i].PeakRSSMB)
	}
	res.DeliveredMsgsPerSec = round(rate(res.Delivered, time.Duration(last-pub.StartNs)), 2)
	if res.BaselineAnycastMsgsPerSec > 0 {
		res.DeliveredRatio = round(res.DeliveredMsgsPerSec/res.BaselineAnycastMsgsPerSec, 3)
	}
	res.CPUs = runtime.NumCPU()
	return res, nil
}

// runFanoutNodes is RunFanout with --nodes 3.
func runFanoutNodes(ctx context.Context, o FanoutOptions, stdout, stderr io.Writer) error {
	b := procBench{name: "fanout", timeout: o.Timeout, json: o.JSON}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		r := newProcRun(life, exe, dir, o.Sync, stderr)
		ctx, r.died = context.WithCancelCause(ctx)
		defer r.died(nil)
		res, err := runFanoutProcs(ctx, r, o)
		return res, r.stopped(err)
	})
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// linkRun is one run of `bench link`: its node processes, a (producer),
// b (consumer) and c (relay, with --hops 2).
type linkRun struct {
	*procRun
	o        LinkOptions
	baseline baseline
	raw      rawBaseline
}

// urgentKey starts the body of the backlog's priority-9 message.
const urgentKey = "urgent"

// startRelay starts c, which relays the bench address to b at bAddr, and
// returns the address c listens on.
func (r *linkRun) startRelay(ctx context.Context, bAddr string) (string, error) {
	_, info, err := r.startListening(ctx, "c", 0, func(listen string) ([]string, error) {
		cfg, err := r.fileFor(nodeproc.NodeFile{Name: "c", Listen: listen,
			Nodes: [][2]string{{"b", "tcp://" + bAddr}}, Relay: []string{Addr}})
		return []string{"node", "-c", cfg}, err
	})
	return info.Listen, err
}

// startProducer starts a, sending to bench@b through hop (b, or c with
// --hops 2) with the given extra flags.
func (r *linkRun) startProducer(ctx context.Context, hop string, extra ...string) (*nodeproc.Proc, error) {
	f := nodeproc.NodeFile{Name: "a", Nodes: [][2]string{{"b", "tcp://" + hop}}}
	if r.o.Hops == 2 {
		f.Nodes = [][2]string{{"c", "tcp://" + hop}}
		f.Routes = [][2]string{{"b", "c"}}
	}
	cfg, err := r.fileFor(f)
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "agent", "produce", "-c", cfg, "--to", Addr + "@b",
		"--messages", strconv.Itoa(r.o.Messages), "--size", strconv.Itoa(r.o.Size),
		"--window", strconv.Itoa(r.o.Window), "--rate", strconv.FormatFloat(r.o.Rate, 'f', -1, 64),
		"--queues", strconv.Itoa(r.o.Queues)}
	a, _, err := r.start(ctx, "a", append(args, extra...)...)
	return a, err
}

// startConsumer starts b, listening on port (0: any free one), to receive
// n messages.
func (r *linkRun) startConsumer(ctx context.Context, port, n int, extra ...string) (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
	return r.startListening(ctx, "b", port, func(listen string) ([]string, error) {
		// With several queues, a weighs as many more idle send queues
		// after the run (agent moreQueues): b takes what they carry too.
		receive := make([]string, r.o.Queues)
		if r.o.Queues > 1 {
			receive = make([]string, 2*r.o.Queues)
		}
		for i := range receive {
			receive[i] = QueueName(Addr, i, len(receive))
		}
		cfg, err := r.fileFor(nodeproc.NodeFile{Name: "b", Listen: listen, Receive: receive})
		args := []string{"bench", "agent", "consume", "-c", cfg, "--from", Addr, "--messages", strconv.Itoa(n),
			"--queues", strconv.Itoa(r.o.Queues)}
		return append(args, extra...), err
	})
}

// runLink is the steady scenario: b, then c, then a, and the messages
// flow as a sends them.
func (r *linkRun) runLink(ctx context.Context) (*linkResult, error) {
	b, bInfo, err := r.startConsumer(ctx, 0, r.o.Messages)
	if err != nil {
		return nil, err
	}
	hop := bInfo.Listen
	if r.o.Hops == 2 {
		if hop, err = r.startRelay(ctx, hop); err != nil {
			return nil, err
		}
	}
	var extra []string
	if r.o.Queues > 1 {
		extra = append(extra, "--wait-drained") // to weigh the idle send queues
	}
	a, err := r.startProducer(ctx, hop, extra...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.progress, "sending %d messages over %d send queues...\n", r.o.Messages, r.o.Queues)
	var prod producedEvent
	if err := a.WaitEvent(ctx, "produced", &prod); err != nil {
		return nil, err
	}
	var cons consumedEvent
	if err := b.WaitEvent(ctx, "consumed", &cons); err != nil {
		return nil, err
	}
	elapsed := time.Duration(cons.LastNs - prod.StartNs)
	res := &linkResult{
		linkFigures: r.base("link", r.rss(map[string]float64{"a": prod.PeakRSSMB, "b": cons.PeakRSSMB})),
		P50ms:       cons.P50ms, P99ms: cons.P99ms, MaxMs: cons.MaxMs,
	}
	res.setCommits(map[string]commitFigures{"a": prod.commitFigures, "b": cons.commitFigures})
	res.MsgsPerSec = round(rate(int64(r.o.Messages), elapsed), 2)
	res.EnqueueMsgsPerSec = round(rate(int64(prod.Count), time.Duration(prod.DurableNs-prod.StartNs)), 2)
	res.ElapsedSeconds = round(elapsed.Seconds(), 3)
	res.setRatios()
	if r.o.Queues > 1 {
		var dr DrainedEvent
		if err := a.WaitEvent(ctx, "drained", &dr); err != nil {
			return nil, err
		}
		res.GoKiBPerQueue = round(dr.GoMemGrowthKiB/float64(r.o.Queues), 2)
		res.RSSKiBPerQueue = round(dr.RSSGrowthKiB/float64(r.o.Queues), 2)
		if dr.MoreQueues > 0 {
			res.MoreGoKiBPerQueue = round(dr.MoreGoMemGrowthKiB/float64(dr.MoreQueues), 2)
			res.MoreRSSKiBPerQueue = round(dr.MoreRSSGrowthKiB/float64(dr.MoreQueues), 2)
		}
	}
	return res, nil
}

// runBacklog is the backlog scenario: with b down, a queues the messages
// and one urgent message; then b starts and drains them.
func (r *linkRun) runBacklog(ctx context.Context) (*backlogResult, error) {
	port, err := nodeproc.FreePort()
	if err != nil {
		return nil, err
	}
	bAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hop := bAddr
	if r.o.Hops == 2 {
		if hop, err = r.startRelay(ctx, bAddr); err != nil {
			return nil, err
		}
	}
	extra := []string{"--then-urgent", urgentKey}
	if r.o.Hops == 2 {
		extra = append(extra, "--wait-drained") // the backlog moves on to c
	}
	a, err := r.startProducer(ctx, hop, extra...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.progress, "queueing %d messages with b down...\n", r.o.Messages)
	var prod producedEvent
	if err := a.WaitEvent(ctx, "produced", &prod); err != nil {
		return nil, err
	}
	queuedRSS := prod.PeakRSSMB
	if r.o.Hops == 2 {
		fmt.Fprintf(r.progress, "waiting for the backlog to move from a to c...\n")
		var dr DrainedEvent
		if err := a.WaitEvent(ctx, "drained", &dr); err != nil {
			return nil, err
		}
	}
	b, _, err := r.startConsumer(ctx, port, r.o.Messages+1, "--urgent-key", urgentKey)
	if err != nil {
		return nil, err
	}
	var cons consumedEvent
	if err := b.WaitEvent(ctx, "consumed", &cons); err != nil {
		return nil, err
	}
	return r.backlogResult(prod, cons, queuedRSS)
}

func (r *linkRun) backlogResult(prod producedEvent, cons consumedEvent, queuedRSS float64) (*backlogResult, error) {
	if cons.UrgentNs == 0 {
		return nil, errors.New("b received every message but none starting with " + urgentKey + ": the priority-9 message was lost")
	}
	elapsed := time.Duration(cons.LastNs - cons.ReadyNs)
	res := &backlogResult{
		linkFigures: r.base("link-backlog", r.rss(map[string]float64{"a": prod.PeakRSSMB, "b": cons.PeakRSSMB})),
		UrgentMs:    round(ms(time.Duration(cons.UrgentNs-cons.ReadyNs)), 3),
		UrgentIndex: cons.UrgentIndex,
		QueuedRSSMB: queuedRSS,
	}
	res.setCommits(map[string]commitFigures{"a": prod.commitFigures, "b": cons.commitFigures})
	res.MsgsPerSec = round(rate(int64(r.o.Messages+1), elapsed), 2)
	res.EnqueueMsgsPerSec = round(rate(int64(prod.Count), time.Duration(prod.DurableNs-prod.StartNs)), 2)
	res.ElapsedSeconds = round(elapsed.Seconds(), 3)
	res.setRatios()
	return res, nil
}

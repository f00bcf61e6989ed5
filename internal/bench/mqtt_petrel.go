package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// petrelMQTTConf is the YAML of the bench node beyond nodeproc's fields:
// the MQTT listener on addr, the admin endpoint on admin (for /metrics)
// and the topic space of the bench's topics.
func petrelMQTTConf(addr, admin string) string {
	return fmt.Sprintf("mqtt:\n  listen: %s\nadmin:\n  listen: %s\ntopics:\n  - pattern: %s\n",
		strconv.Quote(addr), strconv.Quote(admin), strconv.Quote(MQTTSpace))
}

// roundPetrel starts a Petrel node (`petrel node`, a fresh data directory,
// store sync --sync) with its MQTT listener on loopback, measures it and
// stops it. Like mosquitto, it is a process of its own, so that the
// bench's clients and the broker share the machine alike.
func (b *mqttBench) roundPetrel(ctx context.Context, i int) (f MQTTFigures, err error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("petrel-%d", i+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return MQTTFigures{}, fmt.Errorf("petrel folder: %w", err)
	}
	run := newProcRun(b.life, b.exe, dir, b.o.Sync, b.progress)
	ctx, run.died = context.WithCancelCause(ctx)
	defer run.died(nil)
	var admin string
	_, info, err := run.startListening(ctx, "petrel", 0, func(listen string) ([]string, error) {
		port, err := nodeproc.FreePort()
		if err != nil {
			return nil, err
		}
		admin = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		path, err := run.fileFor(nodeproc.NodeFile{Name: "petrel", Extra: petrelMQTTConf(listen, admin)})
		return []string{"node", "-c", path}, err
	})
	if err != nil {
		return MQTTFigures{}, run.stopped(err)
	}
	fmt.Fprintf(b.progress, "round %d: petrel node, MQTT on %s, sync %s...\n", i+1, info.MQTT, b.o.Sync)
	f, err = b.measureCommits(ctx, "tcp://"+info.MQTT, "http://"+admin+"/metrics")
	if err != nil {
		err = fmt.Errorf("petrel: %w", err)
	}
	return f, run.stopped(err)
}

// measureCommits measures the node at url and counts the group commits
// its store made meanwhile, from the node's /metrics at metrics: with
// sync full, each is an fsync that some PUBACKs waited for.
func (b *mqttBench) measureCommits(ctx context.Context, url, metrics string) (MQTTFigures, error) {
	before, err := storeCommits(ctx, metrics)
	if err != nil {
		return MQTTFigures{}, err
	}
	f, err := b.measure(ctx, url)
	if err != nil {
		return f, err
	}
	after, err := storeCommits(ctx, metrics)
	if err != nil {
		return f, err
	}
	f.StoreCommits = after[0] - before[0]
	f.StoreCommitRequests = after[1] - before[1]
	return f, nil
}

// storeCommits reads petrel_store_commits_total and
// petrel_store_commit_requests_total from a node's /metrics.
func storeCommits(ctx context.Context, metrics string) ([2]int64, error) {
	var out [2]int64
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("read the node's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("read the node's metrics: %s", resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		i := slices.Index([]string{"petrel_store_commits_total", "petrel_store_commit_requests_total"}, name)
		if !ok || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return out, fmt.Errorf("metric %s: %w", name, err)
		}
		out[i] = int64(v)
		found++
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read the node's metrics: %w", err)
	}
	if found != 2 {
		return out, fmt.Errorf("the node's metrics lack petrel_store_commits_total or petrel_store_commit_requests_total")
	}
	return out, nil
}

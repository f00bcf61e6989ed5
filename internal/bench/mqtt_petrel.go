package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// petrelMQTTConf is the YAML of the bench node beyond nodeproc's fields:
// the MQTT listener on addr and the topic space of the bench's topics.
func petrelMQTTConf(addr string) string {
	return fmt.Sprintf("mqtt:\n  listen: %s\ntopics:\n  - pattern: %s\n", strconv.Quote(addr), strconv.Quote(MQTTSpace))
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
	_, info, err := run.startListening(ctx, "petrel", 0, func(listen string) ([]string, error) {
		path, err := run.fileFor(nodeproc.NodeFile{Name: "petrel", Extra: petrelMQTTConf(listen)})
		return []string{"node", "-c", path}, err
	})
	if err != nil {
		return MQTTFigures{}, run.stopped(err)
	}
	fmt.Fprintf(b.progress, "round %d: petrel node, MQTT on %s, sync %s...\n", i+1, info.MQTT, b.o.Sync)
	f, err = b.measure(ctx, "tcp://"+info.MQTT)
	if err != nil {
		err = fmt.Errorf("petrel: %w", err)
	}
	return f, run.stopped(err)
}

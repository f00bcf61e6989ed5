package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/bench"
	"github.com/petrelmq/petrel/internal/chaos"
	"github.com/petrelmq/petrel/message"
)

// chaosKeys are the keys one set of producers attempted and got an ok
// for.
type chaosKeys struct{ attempted, ok map[string]bool }

func newChaosKeys() chaosKeys { return chaosKeys{map[string]bool{}, map[string]bool{}} }

// check reads every stopped node's queue and subscription and compares
// them with what the producers printed: node n's queue must hold what its
// predecessor sent it, and every subscription every topic publish. It
// returns the report and the number of sends attempted.
func (cl *chaosCluster) check() (*chaos.Report, int, error) {
	queueKeys := map[string]chaosKeys{} // by receiving node
	topicKeys := newChaosKeys()
	attempted := 0
	for _, n := range cl.names {
		q := newChaosKeys()
		queueKeys[cl.next(n)] = q
		for _, p := range cl.agents[n] {
			for _, l := range p.Lines() {
				verb, k, ok := strings.Cut(l, " ")
				if !ok || (verb != "attempt" && verb != "ok") {
					continue
				}
				key, err := chaos.ParseKey(k)
				if err != nil {
					continue
				}
				set := q
				if key.Topic {
					set = topicKeys
				}
				if verb == "attempt" {
					set.attempted[k] = true
					attempted++
				} else {
					set.ok[k] = true
				}
			}
		}
	}
	r := chaos.NewReport()
	for _, n := range cl.names {
		queue, sub, err := readChaosStore(cl.ctx, n, cl.dataDir(n), cl.o.FileSize, func(key, why string) {
			r.Corrupt(n+" queue "+chaosQueue, key, why)
		})
		if err != nil {
			return nil, 0, err
		}
		r.Check(n+" queue "+chaosQueue, queueKeys[n].attempted, queueKeys[n].ok, queue)
		r.Check(n+" subscription "+chaosSubName, topicKeys.attempted, topicKeys.ok, sub)
	}
	return r, attempted, nil
}

// readChaosStore opens a stopped node's store and returns the keys of its
// chaos queue and of its chaos subscription, in delivery order.
func readChaosStore(ctx context.Context, name, dataDir string, fileSize int, corrupt func(key, why string)) (queue, sub []string, err error) {
	node, err := petrel.Open(ctx, petrel.Config{Name: name, DataDir: dataDir,
		Topics: []petrel.TopicConfig{{Pattern: chaosSpace}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s's store: %w", name, err)
	}
	defer node.Close()
	c, err := node.Consumer(chaosQueue)
	if err != nil {
		return nil, nil, err
	}
	if queue, err = pollKeys(node, c, chaosQueue, chaosQueue, fileSize, corrupt); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	s, err := node.Subscribe(ctx, chaosSpace, petrel.SubscribeOptions{Name: chaosSubName, Durable: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: rejoin the subscription: %w", name, err)
	}
	if sub, err = pollKeys(node, s, "sub:"+chaosSubName, chaosTopic, fileSize, corrupt); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return queue, sub, nil
}

// chaosBodySize is the --size the producers send with.
const chaosBodySize = 64

// pollKeys takes every message of c, leaving them stored, and checks that
// they are as many as the queue's depth. Each message is compared whole
// with the one its producer sent under its key, to the address wantAddr;
// one that differs is corrupt. A file message's key is its file
// name; its received file must hold what the producer wrote
// (bench.FileContent), or corrupt is called.
func pollKeys(node *petrel.Node, c *petrel.Consumer, queue, wantAddr string, fileSize int, corrupt func(key, why string)) ([]string, error) {
	var keys []string
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("poll %s after %d: %w", queue, len(keys), err)
		}
		key := bench.KeyOf(d.Body)
		if d.Kind == message.KindFile {
			key = d.File.Filename
			if why := fileDiffers(d, key, fileSize); why != "" {
				corrupt(key, why)
			}
		}
		// The whole message, not only the key its body starts with: body,
		// priority, data type, properties, and the address it was sent to.
		why := bench.KeyedDiffers(key, d.Message, chaosBodySize)
		if addr, _, _ := message.ParseDestination(d.Destination); addr != wantAddr {
			why = strings.TrimPrefix(why+"; destination "+d.Destination+", want "+wantAddr, "; ")
		}
		if why != "" {
			corrupt(key, why)
		}
		keys = append(keys, key)
	}
	if st, _ := node.QueueStat(queue); st.Depth != int64(len(keys)) {
		return nil, fmt.Errorf("polled %d messages from %s, its depth is %d", len(keys), queue, st.Depth)
	}
	return keys, nil
}

// fileDiffers reports how the received file of d differs from the one
// sent under key, "" if it does not.
func fileDiffers(d *petrel.Delivery, key string, size int) string {
	got, err := os.ReadFile(d.File.ReceivedFilePath)
	if err != nil {
		return err.Error()
	}
	sum := sha256.Sum256(got)
	switch {
	case hex.EncodeToString(sum[:]) != d.File.FileChecksum:
		return fmt.Sprintf("SHA-256 %x, the message says %s", sum, d.File.FileChecksum)
	case !bytes.Equal(got, bench.FileContent(key, size)):
		return fmt.Sprintf("%d bytes, not the %d sent", len(got), size)
	}
	return ""
}

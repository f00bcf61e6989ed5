package petrel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/petrelmq/petrel/queue"
)

// Sets of records a node keeps in its store's meta table (its durable
// subscriptions, the patterns it announced, the interest it learned) are
// stored one record per key, under a prefix: a change writes the record
// that changed, never the whole set, whose size a peer or client may set.
// Builds before kept each set as one JSON list under one key; loadRecords
// moves such a list to the one-per-key form.

// setRecords stores each of the records under its key, or deletes the key
// of a nil record, in one commit.
func (n *Node) setRecords(ctx context.Context, records map[string]any) error {
	ops := make([]*queue.Op, 0, len(records))
	for key, r := range records {
		var v []byte
		if r != nil {
			var err error
			if v, err = json.Marshal(r); err != nil {
				return fmt.Errorf("save %s: %w", key, err)
			}
		}
		op, err := n.store.SubmitMeta(key, v)
		if err != nil {
			return fmt.Errorf("save %s: %w", key, err)
		}
		ops = append(ops, op)
	}
	for _, op := range ops {
		if err := op.Wait(ctx); err != nil {
			return fmt.Errorf("save records: %w", err)
		}
	}
	return nil
}

// loadRecords returns the records stored under prefix, one per key, in
// key order. An older build's list under legacy is first stored one
// record per key (keyOf), then legacy is deleted: a stop in between leaves
// both, which the next start reads alike.
func loadRecords[T any](ctx context.Context, n *Node, legacy, prefix string, keyOf func(T) string) ([]T, error) {
	raw, err := n.store.Meta(ctx, legacy)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", legacy, err)
	}
	if raw != nil {
		var old []T
		if err := json.Unmarshal(raw, &old); err != nil {
			return nil, fmt.Errorf("load %s: %w", legacy, err)
		}
		moved := make(map[string]any, len(old))
		for _, r := range old {
			moved[keyOf(r)] = r
		}
		if err := n.setRecords(ctx, moved); err != nil {
			return nil, err
		}
		if err := n.store.SetMeta(ctx, legacy, nil); err != nil {
			return nil, fmt.Errorf("load %s: %w", legacy, err)
		}
	}
	keys, values, err := n.store.MetaPrefix(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", prefix, err)
	}
	out := make([]T, 0, len(values))
	for i, v := range values {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("load the record %q: %w", keys[i], err)
		}
		out = append(out, r)
	}
	return out, nil
}

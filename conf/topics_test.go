package conf

import (
	"strings"
	"testing"
	"time"
)

func TestTopicsSection(t *testing.T) {
	f, err := Parse("t.yaml", []byte("topics:\n  - pattern: orders.#\n  - pattern: alerts.*\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.NodeConfig()
	if len(cfg.Topics) != 2 || cfg.Topics[0].Pattern != "orders.#" || cfg.Topics[1].Pattern != "alerts.*" {
		t.Fatalf("topics = %+v", cfg.Topics)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"topics:\n  - pattern: orders..x\n", "t.yaml:2"},
		{"topics:\n  - {}\n", "pattern"},
		{"topics:\n  - pattern: a.#\n  - pattern: a.#\n", "declared twice"},
		{"topics:\n  - pattern: orders.#\naddresses:\n  - name: orders.eu\n", "a name is an address or a topic"},
	} {
		_, err := Parse("t.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
}

// TestTopicsKeepAndGrace: a space's keep policy, its max_queued_messages
// and topic_interest_grace reach petrel.Config, and their bad values are
// refused with the key.
func TestTopicsKeepAndGrace(t *testing.T) {
	f, err := Parse("t.yaml", []byte("topics:\n  - pattern: orders.#\n    keep: {messages: 50, age: 2h}\n    max_queued_messages: 1000\n    overflow: drop_oldest\n  - pattern: alerts.*\ntopic_interest_grace: 90s\ntopic_forward_max_queued: 100000\ntopic_forward_overflow: drop_oldest\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.NodeConfig()
	if k := cfg.Topics[0].Keep; k.Messages != 50 || k.Age != 2*time.Hour {
		t.Fatalf("keep = %+v", k)
	}
	if cfg.Topics[0].MaxQueuedMessages != 1000 || cfg.Topics[1].MaxQueuedMessages != 0 || cfg.Topics[0].Overflow != "drop_oldest" {
		t.Fatalf("max_queued_messages = %d and %d, want 1000 and 0", cfg.Topics[0].MaxQueuedMessages, cfg.Topics[1].MaxQueuedMessages)
	}
	if k := cfg.Topics[1].Keep; k.Messages != 0 || k.Age != 0 {
		t.Fatalf("a space without keep got %+v", k)
	}
	if cfg.TopicInterestGrace != 90*time.Second || cfg.TopicForwardMaxQueued != 100000 || cfg.TopicForwardOverflow != "drop_oldest" {
		t.Fatalf("grace = %v, topic_forward_max_queued = %d, topic_forward_overflow = %q", cfg.TopicInterestGrace, cfg.TopicForwardMaxQueued, cfg.TopicForwardOverflow)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"topics:\n  - pattern: a.#\n    keep: {age: 1h}\n", "topics[0].keep: a keep policy needs a bound"},
		{"topics:\n  - pattern: a.#\n    keep: {messages: 0}\n", "topics[0].keep.messages"},
		{"topics:\n  - pattern: a.#\n    keep: {messages: 5, age: -1s}\n", "topics[0].keep.age"},
		{"topics:\n  - pattern: a.#\n    keep: {messages: 5, size: 3}\n", "unknown field"},
		{"topics:\n  - pattern: a.#\n    max_queued_messages: -1\n", "topics[0].max_queued_messages"},
		{"topics:\n  - pattern: a.#\n    overflow: drop_head\n", "topics[0].overflow"},
		{"topic_interest_grace: 0s\n", "topic_interest_grace"},
		{"topic_forward_max_queued: -5\n", "topic_forward_max_queued"},
		{"topic_forward_overflow: drop_head\n", "topic_forward_overflow"},
	} {
		_, err := Parse("t.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
}

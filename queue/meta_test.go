package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A key SubmitMarked stores commits with its puts, and only with them: a
// put refused for a full store leaves none. Changes of one key commit in
// the order they were submitted, and MetaPrefix finds the keys of a
// prefix, whatever characters it holds, after a restart too.
func TestSubmitMarked(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, func(c *Config) { c.MaxMessages = 2 })
	q := mustQueue(t, s, "q", KindReceive)
	wait := func(op *Op, err error) error {
		if err != nil {
			return err
		}
		return op.Wait(ctx)
	}
	const prefix = "mark/é_%/"
	if err := wait(s.SubmitMarked([]Put{{Queue: q, Msg: msg(4, "one")}}, prefix+"1", []byte("v1"))); err != nil {
		t.Fatal(err)
	}
	if err := wait(s.SubmitMarked(nil, prefix+"2", nil)); err != nil {
		t.Fatalf("a key alone: %v", err)
	}
	if err := s.SetMeta(ctx, "mark/e__/3", []byte("not in the prefix")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, msg(4, "two")) // the store is full now
	err := wait(s.SubmitMarked([]Put{{Queue: q, Msg: msg(4, "three")}}, prefix+"3", []byte("v3")))
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("put past the limit: %v, want ErrStoreFull", err)
	}
	// A deletion, then the key again with a put, neither awaited: the
	// second wins. The first put is acked to make room.
	_, d := pollBody(t, q)
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if _, err := s.SubmitMeta(prefix+"1", nil); err != nil {
		t.Fatal(err)
	}
	if err := wait(s.SubmitMarked([]Put{{Queue: q, Msg: msg(4, "four")}}, prefix+"1", []byte("v1b"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, nil)
	keys, values, err := s.MetaPrefix(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{prefix + "1", prefix + "2"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if string(values[0]) != "v1b" || len(values[1]) != 0 {
		t.Fatalf("values %q", values)
	}
	q, _ = s.Lookup("q")
	if st := q.Stats(); st.Depth != 2 {
		t.Fatalf("depth %d, want 2 (two and four)", st.Depth)
	}
}

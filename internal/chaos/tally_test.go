package chaos

import (
	"testing"
)

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func TestCheck(t *testing.T) {
	attempted := set("n0.0-4-0", "n0.0-5-1", "n0.0-4-2", "n0.0-4-3", "n0.1t-4-0")
	oks := set("n0.0-4-0", "n0.0-5-1", "n0.0-4-2", "n0.1t-4-0")
	for _, c := range []struct {
		name   string
		stored []string
		want   Counts
	}{
		{"clean", []string{"n0.0-5-1", "n0.0-4-0", "n0.0-4-2", "n0.1t-4-0"}, Counts{Ok: 4, Stored: 4}},
		{"attempted only is fine", []string{"n0.0-5-1", "n0.0-4-0", "n0.0-4-2", "n0.0-4-3", "n0.1t-4-0"}, Counts{Ok: 4, Stored: 5}},
		{"lost", []string{"n0.0-5-1", "n0.0-4-2", "n0.1t-4-0"}, Counts{Ok: 4, Stored: 3, Lost: 1}},
		{"duplicated", []string{"n0.0-5-1", "n0.0-4-0", "n0.0-4-2", "n0.0-4-2", "n0.1t-4-0"}, Counts{Ok: 4, Stored: 5, Duplicated: 1}},
		{"out of order", []string{"n0.0-5-1", "n0.0-4-2", "n0.0-4-0", "n0.1t-4-0"}, Counts{Ok: 4, Stored: 4, OutOfOrder: 1}},
		{"unexpected", []string{"n0.0-5-1", "n0.0-4-0", "n0.0-4-2", "n0.1t-4-0", "n0.0-4-9", "junk"}, Counts{Ok: 4, Stored: 4, Unexpected: 2}},
	} {
		r := NewReport()
		r.Check("n1 chaos", attempted, oks, c.stored)
		if r.Total != c.want {
			t.Errorf("%s: got %+v, want %+v (%v)", c.name, r.Total, c.want, r.Examples)
		}
		if c.want.Bad() > 0 && len(r.Examples) == 0 {
			t.Errorf("%s: no example given", c.name)
		}
	}
	files := set("n0.0f-4-5", "n0.0f-4-9")
	r := NewReport()
	r.Check("n1", files, files, []string{"n0.0f-4-9", "n0.0f-4-5"})
	if r.Total != (Counts{Ok: 2, Stored: 2}) {
		t.Errorf("files out of send order: %+v, want no fault (files are not ordered)", r.Total)
	}
	r = NewReport()
	r.Check("n1", attempted, oks, []string{"n0.0-5-1", "n0.0-4-2", "n0.1t-4-0"})
	if g := r.Groups["n0 queue p4"]; g.Lost != 1 || g.Ok != 2 {
		t.Errorf("group n0 queue p4: %+v", g)
	}
	if g := r.Groups["n0 topic p4"]; g != (Counts{Ok: 1, Stored: 1}) {
		t.Errorf("group n0 topic p4: %+v", g)
	}
}

func TestCorrupt(t *testing.T) {
	r := NewReport()
	r.Corrupt("n1 queue chaos", "n0.2f-3-7", "sha-256 differs")
	if r.Total.Corrupt != 1 || r.Total.Bad() != 1 || r.Groups["n0 file p3"].Corrupt != 1 || len(r.Examples) != 1 {
		t.Errorf("got %+v, groups %v", r.Total, r.Groups)
	}
}

func TestParseKey(t *testing.T) {
	if k, err := ParseKey("n1.0f-2-9"); err != nil || !k.File || k.Topic || k.Incarnation != "0" {
		t.Errorf("file key: %+v, %v", k, err)
	}
	k, err := ParseKey("n2.13t-9-4711")
	if err != nil || k != (Key{Producer: "n2", Incarnation: "13", Topic: true, Priority: 9, N: 4711}) {
		t.Fatalf("got %+v, %v", k, err)
	}
	for _, bad := range []string{"", "n2-9-1", "n2.1-x-1", "n2.1-9", ".1-9-1"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Counts is what the checker found for one stream or a sum of them.
type Counts struct {
	// Ok are the sends a producer was told were durable; Stored the copies
	// found in the stores.
	Ok     int `json:"ok"`
	Stored int `json:"stored"`
	// Lost are ok'd sends not stored; Duplicated copies stored more than
	// once; Unexpected stored keys never attempted; OutOfOrder keys stored
	// after a later key of the same producer incarnation and priority,
	// files aside: they are not ordered.
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	Unexpected int `json:"unexpected"`
	OutOfOrder int `json:"out_of_order"`
	// Corrupt are messages that differ from the one sent under their key
	// (body, priority, data type, properties, address), or file messages
	// whose received file is not the one sent.
	Corrupt int `json:"corrupt"`
}

// Bad is the number of faults the counts hold.
func (c Counts) Bad() int { return c.Lost + c.Duplicated + c.Unexpected + c.OutOfOrder + c.Corrupt }

func (c *Counts) add(o Counts) {
	c.Ok += o.Ok
	c.Stored += o.Stored
	c.Lost += o.Lost
	c.Duplicated += o.Duplicated
	c.Unexpected += o.Unexpected
	c.OutOfOrder += o.OutOfOrder
	c.Corrupt += o.Corrupt
}

// Key is a parsed message key.
type Key struct {
	Producer    string // the node that sent it
	Incarnation string // which of its processes
	Topic       bool
	File        bool
	Priority    int
	N           int
}

// ParseKey reads <producer>.<incarnation>[t]-<priority>-<n>.
func ParseKey(k string) (Key, error) {
	parts := strings.Split(k, "-")
	if len(parts) != 3 {
		return Key{}, fmt.Errorf("key %q: want <producer>.<incarnation>-<priority>-<n>", k)
	}
	prod, inc, ok := strings.Cut(parts[0], ".")
	if !ok || prod == "" || inc == "" {
		return Key{}, fmt.Errorf("key %q: no <producer>.<incarnation>", k)
	}
	key := Key{Producer: prod, Incarnation: inc}
	if t, ok := strings.CutSuffix(inc, "t"); ok {
		key.Incarnation, key.Topic = t, true
	} else if f, ok := strings.CutSuffix(inc, "f"); ok {
		key.Incarnation, key.File = f, true
	}
	var err1, err2 error
	key.Priority, err1 = strconv.Atoi(parts[1])
	key.N, err2 = strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		return Key{}, fmt.Errorf("key %q: priority and n are numbers", k)
	}
	return key, nil
}

// Group names the producer, kind and priority counts are kept by.
func (k Key) Group() string {
	kind := "queue"
	switch {
	case k.Topic:
		kind = "topic"
	case k.File:
		kind = "file"
	}
	return fmt.Sprintf("%s %s p%d", k.Producer, kind, k.Priority)
}

// stream is the producer incarnation and priority within which n must grow.
func (k Key) stream() string {
	return fmt.Sprintf("%s.%s.%v.%v-%d", k.Producer, k.Incarnation, k.Topic, k.File, k.Priority)
}

// Report is the checker's result over every place it looked.
type Report struct {
	Total Counts `json:"total"`
	// Groups are the counts per producer, kind (queue or topic) and
	// priority, summed over the places that expect them.
	Groups   map[string]Counts `json:"groups"`
	Examples []string          `json:"examples,omitempty"`
}

// NewReport returns an empty report.
func NewReport() *Report { return &Report{Groups: map[string]Counts{}} }

func (r *Report) example(format string, args ...any) {
	if len(r.Examples) < 20 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Corrupt counts a message of key, stored at place, that is not the one
// sent (or whose file is not), and why.
func (r *Report) Corrupt(place, k, why string) {
	key, _ := ParseKey(k)
	g := r.Groups[key.Group()]
	g.Corrupt++
	r.Groups[key.Group()] = g
	r.Total.Corrupt++
	r.example("%s: %s corrupt: %s", place, k, why)
}

// Check compares one place (a queue or a subscription of one node) with
// the producers: attempted and oks are the keys the place should hold
// (attempted: may hold; oks: must hold), stored its keys in delivery
// order, highest priority first and FIFO within one.
func (r *Report) Check(place string, attempted, oks map[string]bool, stored []string) {
	per := map[string]*Counts{}
	at := func(g string) *Counts {
		if per[g] == nil {
			per[g] = &Counts{}
		}
		return per[g]
	}
	count := map[string]int{}
	last := map[string]int{}
	for i, k := range stored {
		key, err := ParseKey(k)
		if err != nil || !attempted[k] {
			group := "unknown"
			if err == nil {
				group = key.Group()
			}
			at(group).Unexpected++
			r.example("%s: unexpected %q at position %d, never attempted", place, k, i)
			continue
		}
		c := at(key.Group())
		c.Stored++
		count[k]++
		if count[k] == 2 {
			c.Duplicated++
			r.example("%s: %s duplicated (again at position %d)", place, k, i)
		}
		// Files are not ordered: several transfers run at once, and a file
		// message is queued at its destination when its file is whole.
		s := key.stream()
		if prev, seen := last[s]; seen && key.N < prev && !key.File {
			c.OutOfOrder++
			r.example("%s: %s out of order, after n=%d (position %d)", place, k, prev, i)
		}
		last[s] = max(last[s], key.N)
	}
	for _, k := range slices.Sorted(maps.Keys(oks)) {
		key, _ := ParseKey(k)
		c := at(key.Group())
		c.Ok++
		if count[k] == 0 {
			c.Lost++
			r.example("%s: %s lost: ok'd and not stored", place, k)
		}
	}
	for g, c := range per {
		sum := r.Groups[g]
		sum.add(*c)
		r.Groups[g] = sum
		r.Total.add(*c)
	}
}

package queue

import (
	"iter"
	"maps"
	"slices"
)

// refCounts is the writer's count of copies per body, for the bodies that
// have more than one (see refsOf); a body it does not hold has one.
//
// A fan-out changes a count at every copy it acks: eight lookups per
// publish to eight subscriptions, and one insert. In a map of every
// shared body not yet freed, each was a cache miss: in the profile of
// `bench fanout --subscribers 8 --durable` the map took a seventh of the
// writer's time. But bodies take ids
// above every earlier one, and subscriptions ack their copies roughly in
// id order, so the counts of recent bodies live in a window indexed by id:
// each subscription walks it along, and the lookup is an index.
//
//	old (map)            win[0]              win[len-1]
//	ids < base  |  base  base+1  ...  base+len(win)-1  |  ids above: none yet
//
// A count of 0 or 1 in the window is a body not counted (one copy) or an
// id that is no body. The window drops its front while the front holds no
// count. A body some subscription leaves unacked while the others go on
// would make the window grow with every id since: a body that would put
// the window past maxRefWindow ids moves the counts of its front into old
// first, until the body falls in the window's first half. So the window
// never spans more than maxRefWindow ids (4 bytes each), and old holds
// what a map held before: the counts at open, and the stragglers.
type refCounts struct {
	base    int64
	win     []int32
	counted int // entries of win above 1
	old     map[int64]int32
}

// maxRefWindow bounds the window: 1 MiB of counts. A fan-out to 8
// subscriptions takes 9 ids per publish, so the window spans about 29,000
// publishes, more than its consumers trail by when they keep up.
const maxRefWindow = 1 << 18

// newRefCounts returns the counts of old, whose every id is below next;
// the window starts at next. (old may hold no id at or above the window's
// base: get looks in the window first.)
func newRefCounts(old map[int64]int32, next int64) *refCounts {
	return &refCounts{base: next, old: old}
}

// get returns body's count of copies: 1 for a body it does not hold.
func (r *refCounts) get(body int64) int32 {
	if i := body - r.base; i >= 0 && i < int64(len(r.win)) {
		return max(r.win[i], 1)
	}
	if n, ok := r.old[body]; ok {
		return n
	}
	return 1
}

// set sets body's count; a count of 0 or 1 forgets it.
func (r *refCounts) set(body int64, n int32) {
	if n <= 1 {
		n = 0
	}
	i := body - r.base
	switch {
	case i >= 0 && i < int64(len(r.win)):
		r.setAt(int(i), n)
		r.dropFront()
	case i >= int64(len(r.win)) && n > 0:
		if r.counted > 0 && i >= maxRefWindow {
			// body is too far ahead of the window's front: the front's
			// counts go to old, until body is in the window's first half.
			r.spill(int(min(i-maxRefWindow/2, int64(len(r.win)))))
			i = body - r.base
		}
		if r.counted == 0 {
			// Nothing counted in the window: it starts over at body.
			r.base, r.win, i = body, r.win[:0], 0
		}
		if have, need := len(r.win), int(i)+1; need > have {
			r.win = slices.Grow(r.win, need-have)[:need]
			clear(r.win[have:]) // an array reused may hold old counts there
		}
		r.setAt(int(i), n)
	case i < 0 && n > 0:
		r.old[body] = n
	case i < 0:
		delete(r.old, body)
	}
	// i beyond the window with n 0: nothing is held for body.
}

func (r *refCounts) setAt(i int, n int32) {
	if (r.win[i] > 1) != (n > 1) {
		if n > 1 {
			r.counted++
		} else {
			r.counted--
		}
	}
	r.win[i] = n
}

// dropFront drops the front of the window while it holds no count.
func (r *refCounts) dropFront() {
	if r.counted == 0 {
		r.base += int64(len(r.win))
		r.win = r.win[:0]
		return
	}
	k := 0
	for k < len(r.win) && r.win[k] <= 1 {
		k++
	}
	if k > 0 {
		r.base += int64(k)
		r.win = r.win[k:]
	}
}

// spill moves the counts of the window's first k ids into old, and drops
// them from the window.
func (r *refCounts) spill(k int) {
	for j, n := range r.win[:k] {
		if n > 1 {
			r.old[r.base+int64(j)] = n
			r.counted--
		}
	}
	r.base += int64(k)
	// A copy, so that the array the dropped front held is freed.
	r.win = append(make([]int32, 0, 2*(len(r.win)-k)), r.win[k:]...)
	r.dropFront()
}

// trim gives back the window's array when it counts nothing, as the
// writer's other arrays go when it idles.
func (r *refCounts) trim() {
	if r.counted == 0 {
		r.base += int64(len(r.win))
		r.win = nil
	}
}

// len returns how many bodies are counted.
func (r *refCounts) len() int { return r.counted + len(r.old) }

// all yields every counted body and its count.
func (r *refCounts) all() iter.Seq2[int64, int32] {
	return func(yield func(int64, int32) bool) {
		for body, n := range maps.All(r.old) {
			if !yield(body, n) {
				return
			}
		}
		for i, n := range r.win {
			if n > 1 && !yield(r.base+int64(i), n) {
				return
			}
		}
	}
}

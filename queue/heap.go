package queue

import "container/heap"

// entryHeap orders redeliveries by rowid, so a message that comes back
// goes ahead of younger messages of its priority.
type entryHeap []entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].rowid < h[j].rowid }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// delayed is a message waiting out its redelivery backoff.
type delayed struct {
	e    entry
	prio uint8
}

// delayHeap orders backed-off messages by the time they may go again.
type delayHeap []delayed

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].e.notBefore < h[j].e.notBefore }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(delayed)) }
func (h *delayHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// promoteLocked moves the backed-off messages whose time came to their
// level's retry heap. It returns the next time one will, or 0.
func (q *Queue) promoteLocked(now int64) int64 {
	for len(q.delayed) > 0 {
		d := q.delayed[0]
		if d.e.notBefore > now {
			return d.e.notBefore
		}
		heap.Pop(&q.delayed)
		heap.Push(&q.lv[d.prio].retry, d.e)
	}
	return 0
}

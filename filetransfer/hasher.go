package filetransfer

import "hash"

// hashItem is a chunk to hash, or, with barrier set, a request to say
// when every chunk before it was hashed.
type hashItem struct {
	p       []byte
	done    func() // called once p is hashed, if set
	barrier chan struct{}
}

// bgHash runs SHA-256 beside the writes: Write hands each chunk over and
// goes on, so that hashing one chunk overlaps writing the next. Whoever
// reads the hash state first waits (wait) for the chunks handed over. Its
// one goroutine ends with stop.
type bgHash struct {
	q    chan hashItem
	done chan struct{}
}

func startHash(h hash.Hash) *bgHash {
	b := &bgHash{q: make(chan hashItem, 16), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for it := range b.q {
			if it.barrier != nil {
				close(it.barrier)
				continue
			}
			h.Write(it.p)
			if it.done != nil {
				it.done()
			}
		}
	}()
	return b
}

// add hands p over; p must not change until done is called (if set) or
// the next wait returns.
func (b *bgHash) add(p []byte, done func()) { b.q <- hashItem{p: p, done: done} }

// wait returns once every chunk added before it was hashed.
func (b *bgHash) wait() {
	c := make(chan struct{})
	b.q <- hashItem{barrier: c}
	<-c
}

// stop ends the goroutine once it hashed what it was given.
func (b *bgHash) stop() {
	close(b.q)
	<-b.done
}

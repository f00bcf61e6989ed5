package authlimit

import (
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Unix(1_000_000, 0)} }
func fails(l *Limiter, remote string, n int) {
	for range n {
		l.Fail(remote)
	}
}

func TestBurstThenOneEvery(t *testing.T) {
	c := newClock()
	l := &Limiter{Burst: 3, Every: 10 * time.Second, Now: c.now}
	for i := range 3 {
		if _, ok := l.Allow("192.0.2.1:4000"); !ok {
			t.Fatalf("check %d refused within the burst", i+1)
		}
		l.Fail("192.0.2.1:4000")
	}
	wait, ok := l.Allow("192.0.2.1:5000") // another port of the same host
	if ok || wait != 10*time.Second {
		t.Fatalf("past the burst: wait %v, allowed %v; want refused for 10s", wait, ok)
	}
	if _, ok := l.Allow("192.0.2.2:4000"); !ok {
		t.Fatal("another address was refused")
	}
	c.add(9 * time.Second)
	if wait, ok := l.Allow("192.0.2.1"); ok || wait != time.Second {
		t.Fatalf("after 9s: wait %v, allowed %v", wait, ok)
	}
	c.add(time.Second)
	if _, ok := l.Allow("192.0.2.1"); !ok {
		t.Fatal("not allowed once one failure drained")
	}
	l.Fail("192.0.2.1")
	if _, ok := l.Allow("192.0.2.1"); ok {
		t.Fatal("one failure more went through")
	}
	if l.Refused() != 3 {
		t.Fatalf("%d refusals counted, want 3", l.Refused())
	}
}

// An IPv6 host counts by its /64: changing the interface id buys nothing.
func TestIPv6CountsBySlash64(t *testing.T) {
	l := &Limiter{Burst: 2, Now: newClock().now}
	l.Fail("[2001:db8:1:2::1]:80")
	l.Fail("[2001:db8:1:2:ffff::9]:80")
	if _, ok := l.Allow("[2001:db8:1:2::abcd]:80"); ok {
		t.Fatal("another address of the same /64 was allowed")
	}
	if _, ok := l.Allow("[2001:db8:1:3::1]:80"); !ok {
		t.Fatal("another /64 was refused")
	}
	// An IPv4 address mapped in IPv6 is the IPv4 address.
	l.Fail("[::ffff:192.0.2.7]:1")
	l.Fail("192.0.2.7:2")
	if _, ok := l.Allow("192.0.2.7:3"); ok {
		t.Fatal("the mapped and plain IPv4 forms counted apart")
	}
}

// The table is bounded: addresses past it share one count, so that many
// addresses get no more guesses than one; drained ones make room.
func TestTableBounded(t *testing.T) {
	c := newClock()
	l := &Limiter{Burst: 2, Every: time.Second, MaxKeys: 100, Now: c.now}
	for i := range 100 {
		l.Fail(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256))
	}
	if l.Len() != 100 {
		t.Fatalf("%d addresses counted", l.Len())
	}
	// Past the bound, new addresses share one count.
	for i := range 1000 {
		l.Fail(fmt.Sprintf("10.1.%d.%d:1", i/256, i%256))
	}
	if l.Len() != 100 {
		t.Fatalf("the table grew to %d past its bound 100", l.Len())
	}
	if _, ok := l.Allow("10.9.9.9:1"); ok {
		t.Fatal("an address without room was allowed though the shared count is spent")
	}
	if _, ok := l.Allow("10.0.0.1:1"); !ok {
		t.Fatal("an address with its own count (one failure) was refused")
	}
	// Once their counts drained, the addresses are swept to make room.
	c.add(2000 * time.Second)
	l.Fail("10.2.0.1:1")
	if l.Len() != 1 {
		t.Fatalf("after the sweep %d addresses are counted, want 1", l.Len())
	}
	if _, ok := l.Allow("10.9.9.9:1"); !ok {
		t.Fatal("the shared count did not drain")
	}
}

func TestUnparsableRemoteSharesOneCount(t *testing.T) {
	l := &Limiter{Burst: 1, Now: newClock().now}
	l.Fail("not an address")
	if _, ok := l.Allow("@"); ok {
		t.Fatal("unparsable remotes counted apart")
	}
}

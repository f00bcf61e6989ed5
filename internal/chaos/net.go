package chaos

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Net is the fault-injecting network between the nodes: one toxiproxy
// proxy per directed link, listening where the dialling node's connector
// points and forwarding to the listener of the node it dials. Faults:
//
//   - Flap stops a proxy, which closes its connections and refuses new
//     ones, and starts it again after a while: a link that drops and comes
//     back.
//   - Partition cuts every link to and from a node with a timeout toxic
//     on both directions: bytes stop passing and, when the partition ends,
//     the connections caught in it are closed, as a silent network drop
//     ends once keepalives give up. New connections made meanwhile are
//     caught too.
type Net struct {
	server *toxiproxy.ApiServer

	mu      sync.Mutex
	proxies map[[2]string]*toxiproxy.Proxy // [from, to]
	wg      sync.WaitGroup
	stop    chan struct{}
}

// NewNet returns a Net with no proxies. Its logs are dropped.
func NewNet() *Net {
	logger := zerolog.New(io.Discard)
	return &Net{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger),
		proxies: map[[2]string]*toxiproxy.Proxy{},
		stop:    make(chan struct{}),
	}
}

// Add starts the proxy of the link from -> to, listening on listen and
// forwarding to upstream.
func (n *Net) Add(from, to, listen, upstream string) error {
	p := toxiproxy.NewProxy(n.server, from+"->"+to, listen, upstream)
	if err := p.Start(); err != nil {
		return fmt.Errorf("proxy %s->%s on %s: %w", from, to, listen, err)
	}
	n.mu.Lock()
	n.proxies[[2]string{from, to}] = p
	n.mu.Unlock()
	return nil
}

// Flap takes the link from -> to down for d, then brings it up again, in
// the background. It reports false if the link is down already.
func (n *Net) Flap(from, to string, d time.Duration) bool {
	n.mu.Lock()
	p := n.proxies[[2]string{from, to}]
	n.mu.Unlock()
	if p == nil {
		return false
	}
	p.Lock()
	up := p.Enabled
	p.Unlock()
	if !up {
		return false
	}
	p.Stop()
	n.after(d, func() {
		// The port was ours a moment ago; retry briefly should another
		// socket have taken it meanwhile.
		for range 50 {
			if err := p.Start(); err == nil || err == toxiproxy.ErrProxyAlreadyStarted {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return true
}

// Partition cuts node off from the others, both ways, for d, in the
// background.
func (n *Net) Partition(node string, d time.Duration) int {
	n.mu.Lock()
	var cut []*toxiproxy.Proxy
	for k, p := range n.proxies {
		if k[0] == node || k[1] == node {
			cut = append(cut, p)
		}
	}
	n.mu.Unlock()
	name := fmt.Sprintf("partition-%d", time.Now().UnixNano())
	added := 0
	for _, p := range cut {
		for _, stream := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":%q,"type":"timeout","stream":%q,"attributes":{"timeout":%d}}`,
				name+"-"+stream, stream, d.Milliseconds())
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err == nil {
				added++
			}
		}
	}
	n.after(d, func() {
		for _, p := range cut {
			for _, stream := range []string{"upstream", "downstream"} {
				p.Toxics.RemoveToxic(context.Background(), name+"-"+stream)
			}
		}
	})
	return added
}

// after runs f once d has passed, or at once when the Net closes.
func (n *Net) after(d time.Duration, f func()) {
	n.mu.Lock()
	stop := n.stop
	n.mu.Unlock()
	n.wg.Go(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stop:
		}
		f()
	})
}

// Heal ends every fault now and waits until the links are up.
func (n *Net) Heal() {
	n.mu.Lock()
	stop := n.stop
	n.stop = make(chan struct{})
	n.mu.Unlock()
	close(stop)
	n.wg.Wait()
}

// Close ends the faults and stops every proxy.
func (n *Net) Close() {
	n.Heal()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.proxies {
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
	}
}

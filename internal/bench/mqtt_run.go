package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// One round of the MQTT bench against one broker: --subscribers clients
// subscribe to MQTTTopicPrefix<run>/#, then --clients clients publish
// --messages messages between them to MQTTTopicPrefix<run>/<client>, each
// keeping --inflight QoS 1 or 2 publishes unacknowledged. <run> is random, so
// that two runs sharing a broker do not count each other's messages. Every message carries its
// send time and its number, so that each subscriber counts every copy,
// once, and times publish -> delivery.

// The MQTT topics of the bench are under MQTTTopicPrefix, which a Petrel
// node maps to the topic space MQTTSpace.
const (
	MQTTTopicPrefix = "bench/mqtt/"
	MQTTSpace       = "bench.mqtt.#"
)

// mqttStamp is the head of every bench message: the send time in
// nanoseconds since the round's start, and the message's number.
//
//	0               8       12          size
//	+---------------+-------+-----------+
//	| sent ns (BE)  | n (BE)| zeros ... |
//	+---------------+-------+-----------+
const mqttStamp = 12

// mqttCounts are the counts and rates of one round against one broker.
type mqttCounts struct {
	publish, delivered float64 // msgs/s
	copies, duplicates int64   // distinct copies delivered; copies delivered again
	lost               int64   // copies never delivered (QoS 0 only; QoS 1 waits for all)
	lat                latencies
}

// mqttRound is one round's clients and counts.
type mqttRound struct {
	o     MQTTOptions
	addr  string // host:port
	runID string
	start atomic.Pointer[time.Time] // set once, before the first publish
	// lost ends the round when a client's connection drops.
	lost     context.CancelCauseFunc
	subs     []*mqttSub
	copies   atomic.Int64
	allIn    chan struct{} // closed when every copy has arrived
	progress chan struct{} // a copy arrived: for the QoS 0 quiet wait
}

// mqttSub is one subscriber: which messages it has, and their latencies.
type mqttSub struct {
	r    *mqttRound
	mu   sync.Mutex
	seen []bool
	dups int64
	last time.Duration // arrival of its latest copy, since start
	lat  latencies
}

// measureMQTT runs one round against the broker at url.
func measureMQTT(ctx context.Context, o MQTTOptions, url string) (mqttCounts, error) {
	var id [4]byte
	crand.Read(id[:])
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	r := &mqttRound{o: o, addr: strings.TrimPrefix(url, "tcp://"), runID: hex.EncodeToString(id[:]), lost: lost,
		allIn: make(chan struct{}), progress: make(chan struct{}, 1)}
	var clients []*paho.Client
	defer func() {
		for _, c := range clients {
			c.Disconnect(&paho.Disconnect{ReasonCode: 0})
		}
	}()
	for i := range o.Subscribers {
		c, err := r.subscribe(ctx, i)
		if c != nil {
			clients = append(clients, c)
		}
		if err != nil {
			return mqttCounts{}, err
		}
	}
	pubs := make([]*paho.Client, 0, o.Clients)
	for i := range o.Clients {
		c, err := r.connect(ctx, fmt.Sprintf("pub-%d", i), nil)
		if err != nil {
			return mqttCounts{}, err
		}
		clients = append(clients, c)
		pubs = append(pubs, c)
	}
	start := time.Now()
	r.start.Store(&start)
	lastAck, err := r.publishAll(ctx, pubs)
	if err != nil {
		return mqttCounts{}, err
	}
	if err := r.waitDelivered(ctx); err != nil {
		return mqttCounts{}, fmt.Errorf("delivery: %w (%d of %d copies)", err, r.copies.Load(), r.want())
	}
	return r.figures(lastAck), nil
}

func (r *mqttRound) want() int64 { return int64(r.o.Messages) * int64(r.o.Subscribers) }

// mqttPacketTimeout bounds the wait for one acknowledgement (CONNACK,
// SUBACK, PUBACK): generous, since a loaded broker is what a bench finds.
const mqttPacketTimeout = time.Minute

// connect connects one client, MQTT 5, clean start; onPublish, if not
// nil, gets the messages it receives. Its connection dropping fails the
// round: the bench does not reconnect, so a drop would be a hole in the
// counts.
func (r *mqttRound) connect(ctx context.Context, role string, onPublish func(paho.PublishReceived) (bool, error)) (*paho.Client, error) {
	id := "petrel-bench-" + r.runID + "-" + role
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, mqttPacketTimeout)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", r.addr)
	if err != nil {
		return nil, fmt.Errorf("connect %s to %s: %w", id, r.addr, err)
	}
	cfg := paho.ClientConfig{Conn: conn, PacketTimeout: mqttPacketTimeout,
		OnClientError: func(err error) {
			r.lost(fmt.Errorf("client %s lost its connection to %s: %w", id, r.addr, err))
		},
		OnServerDisconnect: func(d *paho.Disconnect) {
			r.lost(fmt.Errorf("client %s: %s disconnected it (reason %#x)", id, r.addr, d.ReasonCode))
		},
	}
	if onPublish != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){onPublish}
	}
	c := paho.NewClient(cfg)
	ack, err := c.Connect(dctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	if err != nil {
		conn.Close()
		if ack != nil {
			return nil, fmt.Errorf("connect %s to %s: refused (reason %#x): %w", id, r.addr, ack.ReasonCode, err)
		}
		return nil, fmt.Errorf("connect %s to %s: %w", id, r.addr, err)
	}
	return c, nil
}

// filter is the round's topic filter: every publisher's topic.
func (r *mqttRound) filter() string { return MQTTTopicPrefix + r.runID + "/#" }

// subscribe connects subscriber i and subscribes it to the round's
// filter. It
// returns the client, to disconnect, also when the subscribe failed.
func (r *mqttRound) subscribe(ctx context.Context, i int) (*paho.Client, error) {
	s := &mqttSub{r: r, seen: make([]bool, r.o.Messages)}
	c, err := r.connect(ctx, "sub-"+strconv.Itoa(i), s.handle)
	if err != nil {
		return nil, err
	}
	r.subs = append(r.subs, s)
	sctx, cancel := context.WithTimeout(ctx, mqttPacketTimeout)
	defer cancel()
	ack, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: r.filter(), QoS: byte(r.o.QoS)}}})
	if err != nil {
		return c, fmt.Errorf("subscribe %d to %s: %w", i, r.filter(), err)
	}
	if len(ack.Reasons) != 1 || ack.Reasons[0] >= 0x80 {
		return c, fmt.Errorf("subscribe %d to %s: refused by the broker (reasons %x)", i, r.filter(), ack.Reasons)
	}
	return c, nil
}

// handle counts one delivery. paho calls it from one goroutine per
// client, and acknowledges a QoS 1 copy once it returns.
func (s *mqttSub) handle(pr paho.PublishReceived) (bool, error) {
	p := pr.Packet.Payload
	start := s.r.start.Load()
	if len(p) < mqttStamp || start == nil {
		return true, nil // not the bench's: another user of a shared broker
	}
	now := time.Since(*start)
	sent := time.Duration(binary.BigEndian.Uint64(p))
	n := binary.BigEndian.Uint32(p[8:])
	if int(n) >= len(s.seen) {
		return true, nil
	}
	s.mu.Lock()
	dup := s.seen[n]
	if dup {
		s.dups++
	} else {
		s.seen[n] = true
		s.lat = append(s.lat, now-sent)
		s.last = max(s.last, now)
	}
	s.mu.Unlock()
	if dup {
		return true, nil
	}
	if s.r.copies.Add(1) == s.r.want() {
		close(s.r.allIn)
	}
	select {
	case s.r.progress <- struct{}{}:
	default:
	}
	return true, nil
}

// publishAll has every publisher send its share of the messages and
// returns when the last is acknowledged (QoS 1) or written (QoS 0), as a
// time since the start.
func (r *mqttRound) publishAll(ctx context.Context, pubs []*paho.Client) (time.Duration, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastAck time.Duration
		errs    []error
	)
	per, extra := r.o.Messages/len(pubs), r.o.Messages%len(pubs)
	first := 0
	for i, c := range pubs {
		n := per
		if i < extra {
			n++
		}
		from := first
		first += n
		wg.Go(func() {
			last, err := r.publish(ctx, c, i, from, n)
			mu.Lock()
			defer mu.Unlock()
			lastAck = max(lastAck, last)
			if err != nil {
				errs = append(errs, fmt.Errorf("publisher %d: %w", i, err))
			}
		})
	}
	wg.Wait()
	return lastAck, errors.Join(errs...)
}

// publish sends messages from .. from+n-1 from client c, publisher i:
// o.Inflight goroutines (one at QoS 0) each publish and wait for the
// PUBACK, so that at most o.Inflight are unacknowledged, and fewer if the
// broker's receive maximum says so (paho holds the rest back).
func (r *mqttRound) publish(ctx context.Context, c *paho.Client, i, from, n int) (time.Duration, error) {
	start := *r.start.Load()
	topic := MQTTTopicPrefix + r.runID + "/" + strconv.Itoa(i)
	workers := r.o.Inflight
	if r.o.QoS == 0 {
		workers = 1 // a QoS 0 publish returns once written
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		last time.Duration
		errs []error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				body := make([]byte, r.o.Size)
				binary.BigEndian.PutUint64(body, uint64(time.Since(start)))
				binary.BigEndian.PutUint32(body[8:], uint32(from+k))
				_, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: byte(r.o.QoS), Payload: body})
				at := time.Since(start)
				mu.Lock()
				last = max(last, at)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if cause := context.Cause(ctx); cause != nil {
		err = cause // the root, not the publishes it interrupted
	}
	return last, err
}

// mqttQuiet is how long a QoS 0 round waits for one more copy once
// publishing is done, before it counts the missing copies as lost.
const mqttQuiet = 2 * time.Second

// waitDelivered waits for every copy; at QoS 0, which may drop copies,
// only until none has arrived for mqttQuiet.
func (r *mqttRound) waitDelivered(ctx context.Context) error {
	if r.want() == 0 {
		return nil // no subscribers: publishing alone
	}
	if r.o.QoS > 0 {
		select {
		case <-r.allIn:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	quiet := time.NewTimer(mqttQuiet)
	defer quiet.Stop()
	for {
		select {
		case <-r.allIn:
			return nil
		case <-r.progress:
			quiet.Reset(mqttQuiet)
		case <-quiet.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// figures turns the round's counts into its figures. Call it only once
// every subscriber's handler is done with the copies it counted.
func (r *mqttRound) figures(lastAck time.Duration) mqttCounts {
	f := mqttCounts{publish: rate(int64(r.o.Messages), lastAck)}
	var last time.Duration
	ls := make([]latencies, 0, len(r.subs))
	for _, s := range r.subs {
		s.mu.Lock()
		ls = append(ls, s.lat)
		f.duplicates += s.dups
		last = max(last, s.last)
		s.mu.Unlock()
	}
	f.lat = merge(ls...)
	f.copies = int64(len(f.lat))
	f.lost = r.want() - f.copies
	f.delivered = rate(f.copies, last)
	return f
}

package address

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// Announcer sends this node's announcement to the discovery group every
// Period, from Start until Stop.
//
// Start and Stop are not safe to call concurrently with each other; Update
// and Stats are safe at any time.
type Announcer struct {
	d    discovery
	log  *slog.Logger
	ann  atomic.Pointer[Announcement] // checked by Update; Seq set at each send
	kick chan struct{}                // Update asks for a send now

	// born is when the announcer was made, wall clock and monotonic;
	// lastSeq the sequence of the last packet, read and written by the
	// send loop only. See nextSeq.
	born    time.Time
	lastSeq uint64

	conn   packetConn
	cancel context.CancelFunc
	done   chan struct{}

	sent, failed atomic.Uint64
}

// AnnouncerStats count an Announcer's packets since it was made.
type AnnouncerStats struct {
	Sent   uint64 // announcements sent
	Failed uint64 // sends that failed (no route, interface down)
}

// NewAnnouncer returns an announcer of a. It fails when cfg is invalid
// (ErrDiscoveryConfig), when the group has no port, or when a cannot be
// encoded (ErrAnnouncement).
func NewAnnouncer(cfg DiscoveryConfig, a Announcement) (*Announcer, error) {
	d, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if d.group.Port() == 0 {
		return nil, fmt.Errorf("discovery: group %s: an announcer needs a port: %w", d.group, ErrDiscoveryConfig)
	}
	an := &Announcer{
		d:    d,
		born: time.Now(),
		log:  d.Logger.With(slog.String(logkey.Component, "announcer"), slog.String(logkey.Group, d.group.String())),
		kick: make(chan struct{}, 1),
	}
	if err := an.Update(a); err != nil {
		return nil, err
	}
	return an, nil
}

// Update replaces the announcement, as a configuration reload that changes
// this node's connectors does, and sends it at once if the announcer runs.
// When a cannot be encoded the old announcement stays, and the error wraps
// ErrAnnouncement.
func (an *Announcer) Update(a Announcement) error {
	a.Seq = 1 // any sequence: the size and the rules do not depend on it
	packet, err := a.AppendBinary(nil, an.d.Secret)
	if err != nil {
		return err
	}
	// Decoded back, it is a copy the caller's later changes do not reach.
	own, err := DecodeAnnouncement(packet, an.d.Secret)
	if err != nil {
		return err
	}
	an.ann.Store(&own)
	select {
	case an.kick <- struct{}{}:
	default:
	}
	return nil
}

// Start opens the socket and starts sending; it returns once the socket is
// open, and the first announcement is on its way.
func (an *Announcer) Start() error {
	conn, err := an.d.openSender(context.Background())
	if err != nil {
		return err
	}
	an.start(conn)
	return nil
}

// start runs the announcer on conn, a real socket or a test's fake.
func (an *Announcer) start(conn packetConn) {
	ctx, cancel := context.WithCancel(context.Background())
	an.conn, an.cancel, an.done = conn, cancel, make(chan struct{})
	select {
	case <-an.kick: // the loop sends the latest announcement first anyway
	default:
	}
	go an.announceLoop(ctx)
	an.log.Info("announcer started", slog.Duration("period", an.d.Period))
}

// Stop stops sending, waits for the loop to end and closes the socket.
// Nodes that heard this one expire it after their timeout.
func (an *Announcer) Stop() {
	if an.cancel == nil {
		return
	}
	an.cancel()
	<-an.done
	an.conn.Close()
	an.cancel = nil
	an.log.Info("announcer stopped")
}

// Stats returns the announcer's counters.
func (an *Announcer) Stats() AnnouncerStats {
	return AnnouncerStats{Sent: an.sent.Load(), Failed: an.failed.Load()}
}

// nextSeq returns the sequence of the next packet: the wall clock at the
// announcer's start, in nanoseconds since 1970, plus the time since on the
// monotonic clock, and at least one more than the last. It grows within the
// process whatever the wall clock does, and across restarts as long as the
// wall clock does not step back further than the time between the last
// announcement before a restart and the first after; see Directory.Heard
// for what happens when it does.
func (an *Announcer) nextSeq() uint64 {
	seq := uint64(max(an.born.UnixNano(), 0)) + uint64(time.Since(an.born))
	if seq <= an.lastSeq {
		seq = an.lastSeq + 1
	}
	an.lastSeq = seq
	return seq
}

// announceLoop sends the announcement at once, then every Period and after
// each Update, until ctx ends. Each packet is encoded afresh with the next
// sequence, so that no two are the same.
func (an *Announcer) announceLoop(ctx context.Context) {
	defer close(an.done)
	dst := net.UDPAddrFromAddrPort(an.d.group)
	ticker := time.NewTicker(an.d.Period)
	defer ticker.Stop()
	failing := false
	var packet []byte
	for {
		a := *an.ann.Load()
		a.Seq = an.nextSeq()
		var err error
		packet, err = a.AppendBinary(packet[:0], an.d.Secret)
		if err == nil { // Update checked it; the sequence changes nothing
			_, err = an.conn.WriteTo(packet, dst)
		}
		switch {
		case err == nil:
			an.sent.Add(1)
			if failing {
				an.log.Info("announcing again")
			}
		case !failing:
			// Logged once per outage, not per period.
			an.log.Warn("announcement not sent; retrying every period", slog.Any(logkey.Error, err))
		}
		if err != nil {
			an.failed.Add(1)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-an.kick:
		}
	}
}

package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// maxExtraConns bounds the connections a client opens past its first, for
// consumers past the sessions one connection carries
// (session.DefaultMaxSessions: one for the producers, one per consumer):
// session.MaxConnsPerPeer in all, as a link's pool toward a neighbour, so
// 16 connections carry the producers and 16,383 consumers.
var maxExtraConns = session.MaxConnsPerPeer - 1 // a variable for the test of the bound

// openSession opens s's session on conn, the client's connection, or on
// another when conn carries as many sessions as it may (openExtra). It
// returns the connection the session is on; nil if there was none.
func (s *subscription) openSession(ctx context.Context, conn *session.Conn) (*session.Conn, *session.Session, error) {
	sess, err := s.open(ctx, conn)
	if !errors.Is(err, session.ErrLimit) {
		return conn, sess, err
	}
	return s.c.openExtra(ctx, s)
}

// openExtra opens s's session on a connection past the first that has
// room, dialling one more if none has. One dial at a time: consumers that
// find no room meanwhile wait for it and try it, so a thousand consumers
// past the bound make one connection, not a thousand.
func (c *Client) openExtra(ctx context.Context, s *subscription) (*session.Conn, *session.Session, error) {
	c.extraMu.Lock()
	defer c.extraMu.Unlock()
	c.mu.Lock()
	extras := slices.Clone(c.extras)
	c.mu.Unlock()
	for _, conn := range extras {
		sess, err := s.open(ctx, conn)
		if errors.Is(err, session.ErrLimit) || err != nil && conn.Err() != nil {
			continue // full, or going: its loop subscribes its consumers again
		}
		return conn, sess, err
	}
	if len(extras) >= maxExtraConns {
		return nil, nil, fmt.Errorf("%d connections to the node, each with as many sessions as it may carry: %w", len(extras)+1, session.ErrLimit)
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("another connection for consumers past the %d sessions of one: %w", session.DefaultMaxSessions, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		conn.Close()
		return nil, nil, ErrClosed
	}
	c.extras = append(c.extras, conn)
	// Under mu, where closed is false: close waits for this goroutine.
	c.wg.Go(func() { c.extraLoop(conn) })
	c.mu.Unlock()
	c.log.Info("opened another connection to the node for consumers past the sessions of one",
		slog.Int("connections", len(extras)+2), slog.Int("max_sessions", session.DefaultMaxSessions))
	sess, err := s.open(ctx, conn)
	return conn, sess, err
}

// extraLoop waits for a connection past the first to die, then forgets
// it and subscribes its consumers again: on the client's connection, or
// on another past it. While the client's connection is down too, its
// reconnect subscribes them.
//
// A connection that carried no session for a whole idleConnCheck is
// closed: its consumers are gone, and the node counts it against its
// link.max_connections.
func (c *Client) extraLoop(conn *session.Conn) {
	tick := time.NewTicker(idleConnCheck)
	defer tick.Stop()
	idle := false
wait:
	for {
		select {
		case <-conn.Done():
			break wait
		case <-c.ctx.Done():
			return // close closes it
		case <-tick.C:
			if idle && c.closeIfIdle(conn) {
				return
			}
			idle = conn.Stats().Sessions == 0
		}
	}
	c.mu.Lock()
	c.extras = slices.DeleteFunc(c.extras, func(x *session.Conn) bool { return x == conn })
	subs := c.subsLocked()
	c.mu.Unlock()
	lost := 0
	for _, s := range subs {
		if s.detachFrom(conn) {
			lost++
		}
	}
	c.log.Warn("a connection for consumers lost; subscribing them again", slog.Int("consumers", lost), slog.Any(logkey.Error, conn.Err()))
	primary := c.current()
	if primary == nil {
		return
	}
	// Every consumer without a live session, as attach does: one whose
	// subscribe on conn succeeded just before it died has none, and set
	// refused the session rather than give it one on a dead connection.
	c.subscribeOrphans(primary, subs)
}

// subscribeOrphans subscribes again those of subs without a live session,
// on conn, the client's connection, or past it, and returns how many
// still have none (and have not ended).
func (c *Client) subscribeOrphans(conn *session.Conn, subs []*subscription) (left int) {
	for _, s := range subs {
		if s.onLiveConn() {
			continue
		}
		s.resubscribe(conn)
		if !s.onLiveConn() && !s.over() {
			left++
		}
	}
	return left
}

// idleConnCheck is how often a connection past the first is checked for
// sessions; a variable for the tests.
var idleConnCheck = 30 * time.Second

// closeIfIdle closes conn, a connection past the first, and forgets it,
// if it carries no session. It holds extraMu, so that no consumer opens a
// session on it meanwhile.
func (c *Client) closeIfIdle(conn *session.Conn) bool {
	c.extraMu.Lock()
	defer c.extraMu.Unlock()
	if conn.Stats().Sessions > 0 {
		return false
	}
	c.mu.Lock()
	c.extras = slices.DeleteFunc(c.extras, func(x *session.Conn) bool { return x == conn })
	c.mu.Unlock()
	conn.Close()
	c.log.Info("closed a connection to the node that no consumer uses any more")
	return true
}

// holds reports whether conn is one of the client's live connections.
func (c *Client) holds(conn *session.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return conn.Err() == nil && (conn == c.conn || slices.Contains(c.extras, conn))
}

// subsLocked returns the client's subscriptions. c.mu is held.
func (c *Client) subsLocked() []*subscription {
	subs := make([]*subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	return subs
}

// wakePlace has the placeLoop subscribe again the consumers without a
// connection.
func (c *Client) wakePlace() {
	select {
	case c.place <- struct{}{}:
	default:
	}
}

// placeLoop subscribes again, with a backoff, the consumers that found no
// connection when they were subscribed again (the dial of another
// connection failed), until each has one or the client closes. Without
// it they would wait for the next reconnect of the client's connection,
// which may never come.
func (c *Client) placeLoop() {
	for {
		select {
		case <-c.place:
		case <-c.ctx.Done():
			return
		}
		for delay := c.opts.ReconnectMin; ; delay = min(2*delay, c.opts.ReconnectMax) {
			t := time.NewTimer(delay/2 + rand.N(delay/2+1))
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				return
			}
			waiting, left := c.placeOrphans()
			if waiting+left == 0 {
				break
			}
			if left == 0 {
				continue
			}
			c.log.Warn("consumers without a connection to the node; trying again", slog.Int("consumers", left), slog.Duration("retry_in", min(2*delay, c.opts.ReconnectMax)))
		}
	}
}

// placeOrphans subscribes again the consumers without a live session, on
// the client's connection or past it, and returns how many still have
// none (left). Those whose session the node ended wait out their retry
// first (waiting). While the client's connection is down it does
// nothing: its reconnect subscribes them.
func (c *Client) placeOrphans() (waiting, left int) {
	primary := c.current()
	if primary == nil {
		return 0, 0
	}
	c.mu.Lock()
	subs := c.subsLocked()
	c.mu.Unlock()
	now := time.Now()
	subs = slices.DeleteFunc(subs, func(s *subscription) bool {
		if s.due(now) || s.onLiveConn() {
			return false
		}
		waiting++
		return true
	})
	return waiting, c.subscribeOrphans(primary, subs)
}

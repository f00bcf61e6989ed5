package receiver

import (
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// A full store (past store.max_messages or max_bytes with on_full: error,
// or a full disk) is a pause, not a refusal: what a session carries is
// fine, this node has no room for it now. So the session ends with
// session.CodeFull, after an ack of what committed; a link's sender keeps
// the rest, backs off and sends it again on a new session, and dedupe
// drops what had committed; a client's Send fails with ErrStoreFull.
// Once room returns, the next session goes through.

// fullLogEvery is how often the sessions one peer had ended by a full
// store are logged at most: its senders try again about once a second
// each, for as long as the store stays full.
const fullLogEvery = time.Minute

// endFull ends sess, whose puts the store had no room for (err), and
// counts it.
func (s *Server) endFull(peer session.Peer, sess *session.Session, err error) {
	s.stats.StoreFull.Add(1)
	if held, ok := s.fullLog.Allow(peer.Name); ok {
		s.log.Warn("store full: session ended, its sender tries again later (logged once a minute per peer)",
			slog.String(logkey.Peer, peer.Name), slog.String(logkey.Address, sess.Address()),
			slog.Int64("suppressed", held), slog.Any(logkey.Error, err))
	}
	sess.Abort(session.CodeFull, "node "+s.cfg.Session.Name+": "+err.Error())
}

package receiver

import (
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/session"
)

// The spool quota (filetransfer.Quota) at a file session's announcement:
//
//   - a file larger on its own than the quota, or than a peer's share, is
//     refused for good, with the reason: the sender dead-letters it rather
//     than try for ever;
//   - a file that does not fit now, beside the transfers in the spool, is
//     paused as a full disk pauses it: the session ends with the reason
//     ("spool quota reached"), the transfer shows as paused, and the
//     sender tries again after its backoff, until room comes back. Nothing
//     is lost.

// quotaRefusal returns why a file of size bytes from peer can never be
// taken here, or "".
func (s *Server) quotaRefusal(peer session.Peer, size int64) string {
	if s.cfg.Spool == nil {
		return ""
	}
	if err := s.cfg.Spool.CheckQuota(peer.Name, size); err != nil {
		return err.Error()
	}
	return ""
}

// beginSpool begins or resumes the transfer id from peer in the spool,
// within the quota: an error wrapping filetransfer.ErrSpoolQuota pauses it.
func (s *Server) beginSpool(peer, id string, info filetransfer.Info) (*filetransfer.Incoming, error) {
	return s.cfg.Spool.BeginFor(peer, id, info)
}

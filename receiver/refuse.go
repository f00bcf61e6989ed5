package receiver

import (
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// What a peer sends is data, never a path on this node. A file message
// names the file a node sends from (SendFilePath) and the file it delivered
// (ReceivedFilePath); both are this node's own business. So a file message
// arrives only as the announcement of a file session, where the receiver
// takes the content itself and gives the message its own paths; one in an
// ordinary session is refused for good, and counted, before anything else
// looks at it.

// errFileOutsideSession is the reason a file message that travels outside
// a file session is refused with.
const errFileOutsideSession = "file messages travel only on file sessions: the content follows the announcement there, and this node names its own copy"

// refuseKind returns why m may not travel on an ordinary session (a link's
// or a client's publish session), or "" if it may. A refusal is counted.
func (s *Server) refuseKind(m *message.Message) string {
	if m.Kind != message.KindFile {
		return ""
	}
	s.stats.Refused.Add(1)
	s.stats.FilesOutsideSession.Add(1)
	return errFileOutsideSession
}

// localProps clears from a file announcement every property that only
// means something on the node that set it: the paths, and the source's
// modification time. Then it records who handed the file over, the
// identity the peer proved, as the node judges what it later does on the
// file's behalf (its notice) as that peer.
func localProps(m *message.Message, peer session.Peer) {
	m.File.SendFilePath, m.File.ReceivedFilePath = "", ""
	m.Properties.Delete(filetransfer.PropSourceModTime)
	m.Properties.Set(filetransfer.PropHandedBy, message.String(peer.Name))
}

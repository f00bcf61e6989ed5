package address

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/petrelmq/petrel/message"
)

// Announcement layout, version 2 (version 1 is the same without the
// sequence field).
//
// An announcement is one UDP datagram of at most 1400 bytes, so that it
// fits one Ethernet frame. Integers are big-endian (int32 and int64 in two's
// complement). Every variable-length field carries its length in front of
// it: a string is str8, one length byte n then n bytes, so no string is
// longer than 255 bytes; a list is a one-byte count, then its items. The id,
// the integers and the MAC have the fixed width drawn here.
//
//	offset  field       type      notes
//	[0]     magic       4 bytes   "PTRL" (50 54 52 4C); anything else is foreign
//	[4]     version     uint8     2, or 1 from an older node; any other
//	                              version is refused
//	[5]     name        str8      node name: 1 to 128 bytes of ASCII letters,
//	                              digits, '.', '_', '-', not starting with '.'
//	                              or '-' (message.ValidName)
//	        id          16 bytes  the node's unique id; never all zero
//	        sequence    uint64    version 2 only: never 0, and greater in each
//	                              announcement the node sends than in the one
//	                              before, across restarts too (see Seq)
//	        pairs       uint8     number of connector pairs, 0 to 16
//	        pairs times:
//	          main        connector
//	          has-backup  uint8     0 or 1
//	          backup      connector present only when has-backup is 1
//	        mac-length  uint8     0 (unsigned) or 32
//	        mac         mac-length bytes: HMAC-SHA256, keyed with the shared
//	                              secret, of every byte before mac-length (from
//	                              the magic to the end of the last pair)
//
//	connector:
//	  name        str8      1 to 255 bytes; a label ("c1"), not used to dial
//	  factory     str8      1 to 255 bytes; "tcp" or "tls" today
//	  params      uint8     number of parameters, 0 to 32
//	  params times:
//	    key       str8      1 to 255 bytes; no two keys of one connector equal
//	    type      uint8     0 bool, 1 int32, 2 int64, 3 string
//	    value     type 0: uint8, 0 (false) or 1 (true)
//	              type 1: 4 bytes
//	              type 2: 8 bytes
//	              type 3: str8
//
// The packet ends right after the MAC: a byte more is refused. Every value
// has exactly one encoding (a bool is 0 or 1, a length is exact, nothing is
// padded), and pairs and parameters keep the order the sender gave them, so
// decoding and encoding again gives the same bytes. The golden vectors in
// testdata/announce pin them.
//
// Example, testdata/announce/seq.bin, 74 bytes: node "plant-7", id
// 0123456789abcdeffedcba9876543210, sequence 1733356800000000001, one
// connector tcp://192.0.2.7:7400, no MAC. testdata/announce/single.bin is
// the same announcement in version 1: the version byte 01 and no sequence.
//
//	50 54 52 4c                                      magic "PTRL"
//	02                                               version 2
//	07 70 6c 61 6e 74 2d 37                          name "plant-7"
//	01 23 45 67 89 ab cd ef fe dc ba 98 76 54 32 10  id
//	18 0e 1e d3 6d 02 00 01                          sequence
//	01                                               1 pair
//	02 63 31                                         main: name "c1"
//	03 74 63 70                                        factory "tcp"
//	02                                                 2 parameters
//	04 68 6f 73 74 03 09 31 39 32 2e 30 2e 32 2e 37    "host", string, "192.0.2.7"
//	04 70 6f 72 74 01 00 00 1c e8                      "port", int32, 7400
//	00                                               has-backup 0
//	00                                               mac-length 0
//
// A node with a secret signs every announcement, and drops any that is
// unsigned or whose MAC does not match (compared in constant time). A node
// without a secret sends mac-length 0 and accepts announcements with or
// without a MAC, which it cannot check.
//
// A tcp or tls connector carries its address as a "host" string parameter
// (a host name or an IP address, IPv6 without brackets) and a "port" int32
// parameter, 1 to 65535; any other parameter is an option of the connector
// URI (tls://h:7400?ca=/etc/ca.pem has a "ca" string parameter). A
// receiver skips the connectors whose factory it does not know. See
// AnnouncedConnector.Connector and Announcement.Connectors.
//
// The MAC proves that the sender knows the shared secret; it does not hide
// anything. The sequence, under the MAC, is what stops a replay: the
// directory refuses an announcement whose sequence is not greater than the
// last one it accepted from that node while that node's entry lives (see
// Directory.Heard), so a recorded announcement cannot move a live node back
// to an address it left. Once the entry expired any valid announcement is
// taken again, so a replay at worst keeps a stopped node in the directory
// for as long as the replay goes on. A version 1 announcement has no
// sequence and no such protection; it is still read, from nodes that
// write nothing else. Without a secret nothing is signed, and a forged
// announcement, sequence included, is as good as a real one.
const (
	// AnnouncementMagic starts every announcement.
	AnnouncementMagic = "PTRL"
	// AnnouncementVersion is the layout version this package writes for
	// an announcement with a sequence number.
	AnnouncementVersion = 2
	// AnnouncementVersionNoSeq is the older layout, without a sequence
	// number, which this package still reads, and writes for an
	// announcement whose Seq is 0.
	AnnouncementVersionNoSeq = 1
	// MaxAnnouncementSize is the largest announcement, MAC included.
	MaxAnnouncementSize = 1400
	// MaxAnnouncedPairs is the most connector pairs one announcement holds.
	MaxAnnouncedPairs = 16
	// MaxAnnouncedParams is the most parameters one connector holds.
	MaxAnnouncedParams = 32
)

// The parameter type tags.
const (
	paramBool   = 0
	paramInt32  = 1
	paramInt64  = 2
	paramString = 3
)

const (
	macLen        = sha256.Size
	maxStr        = 255
	annHeaderLen  = len(AnnouncementMagic) + 1
	seqLen        = 8
	minConnLen    = 1 + 1 + 1 + 1 + 1 // name and factory of one byte, no params
	minPairLen    = minConnLen + 1    // and has-backup
	minParamLen   = 1 + 1 + 1 + 1     // key of one byte, type, a bool
	annTrailerLen = 1                 // mac-length
)

// ErrAnnouncement is returned by DecodeAnnouncement when a packet is not an
// announcement this node can read: foreign (another magic), of another
// version, truncated, too long, or breaking a rule of the layout. It is
// returned by AppendBinary when an Announcement breaks one of those rules.
var ErrAnnouncement = errors.New("invalid announcement")

// ErrAnnouncementMAC is returned by DecodeAnnouncement, given a secret, when
// a well-formed announcement has no MAC or a MAC that the secret did not
// make: it comes from a node with another secret, or none.
var ErrAnnouncementMAC = errors.New("announcement not signed with the shared secret")

// Announcement is what a node says of itself in a discovery packet.
type Announcement struct {
	// Name is the node's name.
	Name string
	// ID is the node's unique id.
	ID message.NodeID
	// Seq orders the announcements of one node: each one it sends has a
	// greater Seq than the one before, so that the directory can refuse
	// an older one replayed. An Announcer sets it at each send, from the
	// wall clock at its start plus the time since, so that it grows
	// across restarts of the node as long as the clock does not step
	// back. 0 means none: the announcement is written in layout version
	// 1 (AnnouncementVersionNoSeq), as a node older than the sequence
	// writes it, and is not protected against replay.
	Seq uint64
	// Pairs are the ways to reach the node, each a main connector and an
	// optional backup.
	Pairs []ConnectorPair
}

// ConnectorPair is a main connector and an optional backup, used as
// failover:(main,backup).
type ConnectorPair struct {
	Main   AnnouncedConnector
	Backup *AnnouncedConnector // nil when there is none
}

// AnnouncedConnector is one connector as discovery carries it: a name, a
// factory that knows how to dial it ("tcp", "tls") and typed parameters.
type AnnouncedConnector struct {
	Name    string
	Factory string
	Params  []Param
}

// Param is one typed parameter of an announced connector.
type Param struct {
	Key string
	// Value is a bool, an int32, an int64 or a string; any other type
	// cannot be encoded.
	Value any
}

// AppendBinary appends the encoding of a to dst, with a MAC keyed with
// secret when secret is not empty. When a breaks a rule of the layout it
// returns dst unchanged and an error that wraps ErrAnnouncement.
func (a Announcement) AppendBinary(dst []byte, secret []byte) ([]byte, error) {
	n, err := a.size()
	if err != nil {
		return dst, fmt.Errorf("announcement of %s: %w", quote(a.Name), err)
	}
	if len(secret) > 0 {
		n += macLen
	}
	if n > MaxAnnouncementSize {
		return dst, fmt.Errorf("announcement of %s: %d bytes, more than the %d of one packet (announce fewer connectors or parameters): %w",
			quote(a.Name), n, MaxAnnouncementSize, ErrAnnouncement)
	}
	dst = slices.Grow(dst, n)
	start := len(dst)
	dst = append(dst, AnnouncementMagic...)
	if a.Seq == 0 {
		dst = append(dst, AnnouncementVersionNoSeq)
	} else {
		dst = append(dst, AnnouncementVersion)
	}
	dst = appendStr8(dst, a.Name)
	dst = append(dst, a.ID[:]...)
	if a.Seq != 0 {
		dst = binary.BigEndian.AppendUint64(dst, a.Seq)
	}
	dst = append(dst, byte(len(a.Pairs)))
	for _, p := range a.Pairs {
		dst = p.Main.appendTo(dst)
		if p.Backup == nil {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		dst = p.Backup.appendTo(dst)
	}
	if len(secret) == 0 {
		return append(dst, 0), nil
	}
	body := dst[start:]
	dst = append(dst, macLen)
	return appendMAC(dst, secret, body), nil
}

// appendMAC appends the HMAC-SHA256 of body keyed with secret.
func appendMAC(dst, secret, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return mac.Sum(dst)
}

// size checks a against the layout's rules and returns its encoded size
// without a MAC.
func (a Announcement) size() (int, error) {
	if message.ValidName(a.Name) != nil {
		return 0, fmt.Errorf("%s: %w", badNodeName(a.Name), ErrAnnouncement)
	}
	if a.ID.IsZero() {
		return 0, fmt.Errorf("zero node id: %w", ErrAnnouncement)
	}
	if len(a.Pairs) > MaxAnnouncedPairs {
		return 0, fmt.Errorf("%d connector pairs, more than %d: %w", len(a.Pairs), MaxAnnouncedPairs, ErrAnnouncement)
	}
	n := annHeaderLen + 1 + len(a.Name) + len(a.ID) + 1 + annTrailerLen
	if a.Seq != 0 {
		n += seqLen
	}
	for i, p := range a.Pairs {
		m, err := p.Main.size()
		if err != nil {
			return 0, fmt.Errorf("pair %d main: %w", i+1, err)
		}
		n += m + 1
		if p.Backup != nil {
			b, err := p.Backup.size()
			if err != nil {
				return 0, fmt.Errorf("pair %d backup: %w", i+1, err)
			}
			n += b
		}
	}
	return n, nil
}

func (c AnnouncedConnector) size() (int, error) {
	if err := checkStr("connector name", c.Name, 1); err != nil {
		return 0, err
	}
	if err := checkStr(fmt.Sprintf("connector %s factory", quote(c.Name)), c.Factory, 1); err != nil {
		return 0, err
	}
	if len(c.Params) > MaxAnnouncedParams {
		return 0, fmt.Errorf("connector %s: %d parameters, more than %d: %w", quote(c.Name), len(c.Params), MaxAnnouncedParams, ErrAnnouncement)
	}
	n := 1 + len(c.Name) + 1 + len(c.Factory) + 1
	for i, p := range c.Params {
		m, err := p.size()
		if err != nil {
			return 0, fmt.Errorf("connector %s: %w", quote(c.Name), err)
		}
		for _, q := range c.Params[:i] {
			if q.Key == p.Key {
				return 0, fmt.Errorf("connector %s: parameter %s given twice: %w", quote(c.Name), quote(p.Key), ErrAnnouncement)
			}
		}
		n += m
	}
	return n, nil
}

func (p Param) size() (int, error) {
	if err := checkStr("parameter name", p.Key, 1); err != nil {
		return 0, err
	}
	n := 1 + len(p.Key) + 1
	switch v := p.Value.(type) {
	case bool:
		return n + 1, nil
	case int32:
		return n + 4, nil
	case int64:
		return n + 8, nil
	case string:
		if err := checkStr(fmt.Sprintf("parameter %s", quote(p.Key)), v, 0); err != nil {
			return 0, err
		}
		return n + 1 + len(v), nil
	}
	return 0, fmt.Errorf("parameter %s: value of type %T, want bool, int32, int64 or string: %w", quote(p.Key), p.Value, ErrAnnouncement)
}

// badNodeName says why name is not a node name.
func badNodeName(name string) string {
	return fmt.Sprintf("node name %s is not 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'", quote(name))
}

// checkStr checks that s fits a str8 and has at least min bytes.
func checkStr(what, s string, min int) error {
	switch {
	case len(s) < min:
		return fmt.Errorf("%s is empty: %w", what, ErrAnnouncement)
	case len(s) > maxStr:
		return fmt.Errorf("%s %s is %d bytes, more than %d: %w", what, quote(s), len(s), maxStr, ErrAnnouncement)
	}
	return nil
}

// appendTo appends c, which size has checked.
func (c AnnouncedConnector) appendTo(dst []byte) []byte {
	dst = appendStr8(dst, c.Name)
	dst = appendStr8(dst, c.Factory)
	dst = append(dst, byte(len(c.Params)))
	for _, p := range c.Params {
		dst = appendStr8(dst, p.Key)
		switch v := p.Value.(type) {
		case bool:
			dst = append(dst, paramBool, 0)
			if v {
				dst[len(dst)-1] = 1
			}
		case int32:
			dst = binary.BigEndian.AppendUint32(append(dst, paramInt32), uint32(v))
		case int64:
			dst = binary.BigEndian.AppendUint64(append(dst, paramInt64), uint64(v))
		case string:
			dst = appendStr8(append(dst, paramString), v)
		}
	}
	return dst
}

func appendStr8(dst []byte, s string) []byte {
	return append(append(dst, byte(len(s))), s...)
}

package message

import (
	"fmt"
	"time"
)

// EncodedTTL returns the TTL of an encoded message without decoding it.
func EncodedTTL(data []byte) (time.Duration, error) {
	if len(data) < headerLen {
		return 0, fmt.Errorf("read ttl: %d bytes: %w", len(data), ErrTruncated)
	}
	if data[0] != CodecVersion {
		return 0, fmt.Errorf("read ttl: version %d: %w", data[0], ErrVersion)
	}
	return time.Duration(be.Uint64(data[28:36])), nil
}

// SetEncodedTTL overwrites the TTL of an encoded message in place. A node
// that forwards a message sets its remaining time to live this way, without
// decoding and encoding it again.
func SetEncodedTTL(data []byte, ttl time.Duration) error {
	if len(data) < headerLen {
		return fmt.Errorf("set ttl: %d bytes: %w", len(data), ErrTruncated)
	}
	if data[0] != CodecVersion {
		return fmt.Errorf("set ttl: version %d: %w", data[0], ErrVersion)
	}
	be.PutUint64(data[28:36], uint64(ttl))
	return nil
}

// EncodedKind returns the kind of an encoded message without decoding it,
// or 0 if data is too short or of another codec version. A sender uses it
// to tell file messages, whose content goes first, from the others.
func EncodedKind(data []byte) Kind {
	if len(data) < headerLen || data[0] != CodecVersion {
		return 0
	}
	return Kind(data[1])
}

package filetransfer

import (
	"encoding/binary"
	"io/fs"
	"time"
)

// FileID is one version of a file: the inode it is (device and inode
// number, where the system has them) and its size and modification time
// when it was taken. An outbox compares the file under a name with the
// FileID of the file it sent, so that a new file renamed in under the
// same name while the old one was sent is not taken for it.
type FileID struct {
	Dev, Ino uint64
	Size     int64
	ModTime  time.Time
}

// FileIDOf returns the FileID of the file fi describes.
func FileIDOf(fi fs.FileInfo) FileID {
	id := FileID{Size: fi.Size(), ModTime: fi.ModTime()}
	id.Dev, id.Ino = devIno(fi)
	return id
}

// IsZero reports whether id is unknown: a record from before FileIDs
// were kept, where the file under the name is taken as the one sent.
func (id FileID) IsZero() bool { return id == FileID{} }

// Same reports whether fi is the version of the file id names.
func (id FileID) Same(fi fs.FileInfo) bool {
	o := FileIDOf(fi)
	return o.Dev == id.Dev && o.Ino == id.Ino && o.Size == id.Size && o.ModTime.Equal(id.ModTime)
}

// fileIDLen is the length of an encoded FileID.
const fileIDLen = 32

// AppendBinary appends id's 32-byte encoding to b: dev, ino, size and
// the modification time in Unix nanoseconds, each 8 bytes big-endian.
func (id FileID) AppendBinary(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, id.Dev)
	b = binary.BigEndian.AppendUint64(b, id.Ino)
	b = binary.BigEndian.AppendUint64(b, uint64(id.Size))
	return binary.BigEndian.AppendUint64(b, uint64(id.ModTime.UnixNano()))
}

// ParseFileID reads what AppendBinary wrote; ok is false for any other
// length.
func ParseFileID(b []byte) (id FileID, ok bool) {
	if len(b) != fileIDLen {
		return FileID{}, false
	}
	id.Dev = binary.BigEndian.Uint64(b)
	id.Ino = binary.BigEndian.Uint64(b[8:])
	id.Size = int64(binary.BigEndian.Uint64(b[16:]))
	id.ModTime = time.Unix(0, int64(binary.BigEndian.Uint64(b[24:])))
	return id, true
}

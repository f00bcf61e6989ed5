package filetransfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/petrelmq/petrel/message"
)

// Info describes a file as it is announced in a file message: what the
// receiver must end up with. Filename, Size and SHA256 travel in the
// message (message.FileProps); ModTime stays with the sender, which uses it
// to notice a change during the transfer.
type Info struct {
	Filename string    `json:"filename"` // base name, no directory
	Size     int64     `json:"size"`     // bytes
	SHA256   string    `json:"sha256"`   // lowercase hex, 64 digits
	ModTime  time.Time `json:"mod_time"` // sender side only; zero at a receiver
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Check returns nil when the Info can describe a transfer: a safe Filename
// (ErrBadName otherwise, see CheckName), a size of zero or more and a
// checksum of 64 lowercase hex digits (ErrBadInfo otherwise).
func (i Info) Check() error {
	if err := CheckName(i.Filename); err != nil {
		return err
	}
	if i.Size < 0 {
		return fmt.Errorf("file %q: size %d is negative: %w", i.Filename, i.Size, ErrBadInfo)
	}
	if !sha256Pattern.MatchString(i.SHA256) {
		return fmt.Errorf("file %q: checksum %q is not 64 lowercase hex digits: %w", i.Filename, i.SHA256, ErrBadInfo)
	}
	return nil
}

// Pending reports whether the Info's checksum follows: a file announced
// before its sender had hashed it, whose SHA-256 comes after its last byte
// (see Incoming.SetChecksum). Only a file with content can be pending.
func (i Info) Pending() bool { return i.SHA256 == "" && i.Size > 0 }

// CheckAnnounced is Check for an announcement, which may leave the
// checksum to follow (Pending): it accepts an empty SHA256 when the file
// has content. An empty file has nothing after which a checksum could
// come, so it must carry its own. Check stays strict, for everything that
// must know the checksum.
func (i Info) CheckAnnounced() error {
	if i.SHA256 != "" {
		return i.Check()
	}
	if err := CheckName(i.Filename); err != nil {
		return err
	}
	if i.Size <= 0 {
		return fmt.Errorf("file %q of %d bytes announced without its checksum: only a file with content may have its checksum follow: %w",
			i.Filename, i.Size, ErrBadInfo)
	}
	return nil
}

// InfoFromProps returns the Info a file message announces, for a
// receiver's Begin. Check it before use: the props come from the network.
func InfoFromProps(p message.FileProps) Info {
	return Info{Filename: p.Filename, Size: p.Filesize, SHA256: p.FileChecksum}
}

// SetProps writes the Info into the announcing message's file properties.
func (i Info) SetProps(p *message.FileProps) {
	p.Filename, p.Filesize, p.FileChecksum = i.Filename, i.Size, i.SHA256
}

// sameFile reports whether two Infos announce the same content. ModTime is
// left out: it does not travel to the receiver. A checksum that follows
// (empty) matches any: the transfer id already names the content, and one
// file may be announced pending to one hop and with its checksum later (a
// relay forwards it early, then again once it has verified it).
func (i Info) sameFile(o Info) bool {
	return i.Filename == o.Filename && i.Size == o.Size &&
		(i.SHA256 == o.SHA256 || i.SHA256 == "" || o.SHA256 == "")
}

// Describe reads the file at path once, from start to end with a constant
// amount of memory, and returns its Info. The file is checked before and
// after the read: if it changed meanwhile (a writer still at work), the
// error wraps ErrSourceChanged, because the checksum would describe no
// version of the file. A path that is not a regular file (a directory, a
// named pipe, a device, a symbolic link, which is never followed) is
// refused with ErrNotRegular, without blocking.
func Describe(path string) (Info, error) {
	return DescribeContext(context.Background(), path)
}

// DescribeContext is Describe that stops, with ctx's error, when ctx is
// done: hashing a large file takes seconds, and a node that shuts down
// should not wait for it.
func DescribeContext(ctx context.Context, path string) (Info, error) {
	f, err := openRegular(path)
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxReader{ctx, f}, make([]byte, copyBufSize))
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	info := Info{
		Filename: filepath.Base(path),
		Size:     before.Size(),
		SHA256:   hex.EncodeToString(h.Sum(nil)),
		ModTime:  before.ModTime(),
	}
	if err := info.Check(); err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	after, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	if n != info.Size {
		return Info{}, changed(path, fmt.Sprintf("%d bytes were read where its size was %d", n, info.Size))
	}
	if d := differences(info, after.Size(), after.ModTime()); d != "" {
		return Info{}, changed(path, d)
	}
	return info, nil
}

// DescribeLater returns the Info of the file at path without its SHA-256:
// only the name, size and modification time, from one stat. It is for a
// file announced before it is hashed (its checksum follows, see
// Info.Pending); DescribeMatching computes the checksum later and checks
// that the file is still the one described here.
func DescribeLater(path string) (Info, error) {
	fi, err := os.Lstat(path) // a link is refused, as openRegular does
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("describe %s: %w", path, notRegular(fi.Mode()))
	}
	info := Info{Filename: filepath.Base(path), Size: fi.Size(), ModTime: fi.ModTime()}
	if err := CheckName(info.Filename); err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", path, err)
	}
	return info, nil
}

// DescribeMatching is DescribeContext for a file already described
// without its checksum: the file must still have want's size and
// modification time (else the error wraps ErrSourceChanged), so that the
// checksum returned is the one of the bytes announced.
func DescribeMatching(ctx context.Context, path string, want Info) (Info, error) {
	info, err := DescribeContext(ctx, path)
	if err != nil {
		return Info{}, err
	}
	if d := differences(want, info.Size, info.ModTime); d != "" {
		return Info{}, changed(path, d)
	}
	return info, nil
}

// DescribeKnown returns the Info of the file at path with a SHA-256 the
// caller already has (lowercase hex), without reading the file: only the
// name, size and modification time come from the file. The checksum is
// checked for its form (ErrBadInfo); whether it is the file's is found by
// whoever receives the file, which refuses it as corrupt if it is not.
func DescribeKnown(path, sha256Hex string) (Info, error) {
	info, err := DescribeLater(path)
	if err != nil {
		return Info{}, err
	}
	info.SHA256 = sha256Hex
	if err := info.Check(); err != nil {
		return Info{}, fmt.Errorf("describe %s with the checksum given: %w", path, err)
	}
	return info, nil
}

// ctxReader stops reading once ctx is done. Being a plain Reader, it also
// hides (*os.File).WriteTo, so that io.CopyBuffer reads with the buffer it
// is given (1 MiB) instead of the 32 KiB one of io.Copy's fallback.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Source reads the file of an outgoing transfer and checks that it stays
// the file that was described. It reads through one open descriptor, so
// the bytes sent all come from one file even if the path is renamed; Verify
// reports such a replacement all the same, because the file the user sees
// under the path is then not the one that was sent.
//
// A change that keeps both the size and the modification time (possible
// within the timestamp granularity of the filesystem) is not seen by
// Verify; the receiver's checksum check still refuses the file, and a
// Hasher fed with the chunks lets the sender see it first.
//
// A Source is safe for concurrent use: ReadChunk uses pread.
type Source struct {
	path string
	want Info
	f    *os.File
}

// OpenSource opens the file at path for sending and checks it is still
// what want describes (ErrSourceChanged otherwise). A path that is no
// longer a regular file is refused with ErrNotRegular, without blocking.
func OpenSource(path string, want Info) (*Source, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("open source %s: %w", path, err)
	}
	s := &Source{path: path, want: want, f: f}
	if err := s.Verify(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// Info returns the description the Source is checked against.
func (s *Source) Info() Info { return s.want }

// ReadChunk reads up to len(buf) bytes at offset, never past want.Size
// even if the file grew (Verify reports the growth). It returns 0, io.EOF
// at want.Size. A file that ends before want.Size gives an error wrapping
// ErrSourceChanged; an offset below 0 or past want.Size, ErrOffset.
func (s *Source) ReadChunk(offset int64, buf []byte) (int, error) {
	if offset < 0 || offset > s.want.Size {
		return 0, fmt.Errorf("read %s at %d: the file has %d bytes: %w", s.path, offset, s.want.Size, ErrOffset)
	}
	if offset == s.want.Size {
		return 0, io.EOF
	}
	if rest := s.want.Size - offset; int64(len(buf)) > rest {
		buf = buf[:rest]
	}
	n, err := s.f.ReadAt(buf, offset)
	if errors.Is(err, io.EOF) {
		return n, changed(s.path, fmt.Sprintf("it ends at %d bytes, before its size %d", offset+int64(n), s.want.Size))
	}
	if err != nil {
		if errors.Is(err, fs.ErrClosed) {
			err = ErrClosed
		}
		return n, fmt.Errorf("read %s at %d: %w", s.path, offset, err)
	}
	return n, nil
}

// Verify checks that the file is still the one described: same size and
// modification time, and still the file found under its path. Call it
// after each batch of chunks and once more after the last one, before
// telling the receiver the file is complete. The error wraps
// ErrSourceChanged and says what changed.
func (s *Source) Verify() error {
	fi, err := s.f.Stat()
	if err != nil {
		if errors.Is(err, fs.ErrClosed) {
			err = ErrClosed
		}
		return fmt.Errorf("verify %s: %w", s.path, err)
	}
	if d := differences(s.want, fi.Size(), fi.ModTime()); d != "" {
		return changed(s.path, d)
	}
	pfi, err := os.Lstat(s.path) // a link put there is another file
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return changed(s.path, "it was removed")
	case err != nil:
		return fmt.Errorf("verify %s: %w", s.path, err)
	case !os.SameFile(fi, pfi):
		return changed(s.path, "another file was put in its place")
	}
	return nil
}

// Close closes the file.
func (s *Source) Close() error { return s.f.Close() }

// differences says how a file of size and modTime differs from want, or
// returns "".
func differences(want Info, size int64, modTime time.Time) string {
	var d []string
	if size != want.Size {
		d = append(d, fmt.Sprintf("its size was %d bytes, now %d", want.Size, size))
	}
	if !modTime.Equal(want.ModTime) {
		d = append(d, fmt.Sprintf("its modification time was %s, now %s",
			want.ModTime.Format(time.RFC3339Nano), modTime.Format(time.RFC3339Nano)))
	}
	return strings.Join(d, " and ")
}

// changed is the ErrSourceChanged error for path, with what changed.
func changed(path, what string) error {
	return fmt.Errorf("source %s changed during the transfer: %s; send it again once it is complete: %w",
		path, what, ErrSourceChanged)
}

// Hasher computes the SHA-256 of the chunks a sender sends, in order, so
// that the sender can compare it with the announced checksum at the end
// (Check) and fail the transfer itself rather than let the receiver find
// a corrupt file. It is optional: it costs a second hash of the file. It
// only makes sense when the chunks are fed from offset 0 in order; after a
// resume in the middle, the receiver's check is the only one.
type Hasher struct {
	h hash.Hash
	n int64
}

// NewHasher returns a Hasher at offset 0.
func NewHasher() *Hasher { return &Hasher{h: sha256.New()} }

// Write adds the next chunk. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.h.Write(p)
}

// Check compares what was written with want: the byte count with Size and
// the digest with SHA256. A difference wraps ErrSourceChanged.
func (h *Hasher) Check(want Info) error {
	if h.n != want.Size {
		return fmt.Errorf("%d bytes were sent where the file has %d: %w", h.n, want.Size, ErrSourceChanged)
	}
	if sum := hex.EncodeToString(h.h.Sum(nil)); sum != want.SHA256 {
		return fmt.Errorf("the bytes sent have SHA-256 %s, not the announced %s: %w", sum, want.SHA256, ErrSourceChanged)
	}
	return nil
}

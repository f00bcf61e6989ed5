package demo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// demoFileSize is the file the demo sends across the relay: big enough
// to be cut mid-way, small enough for a few seconds on any machine.
const demoFileSize = 48 << 20

// sendFileAcrossRelay sends a file from A to B through C, cuts the A-C
// link while it moves, and checks that B got it whole, that the transfer
// resumed rather than started again, and that C kept nothing.
func sendFileAcrossRelay(ctx context.Context, d *demo) error {
	r := d.relay
	src := filepath.Join(d.dir, "site-report.bin")
	sum, err := writeDemoFile(src, demoFileSize)
	if err != nil {
		return err
	}
	p := r.a.Producer()
	m := p.CreateFileMessage(relayAddr + "@" + nodeB)
	m.File.SendFilePath = src
	if err := p.Send(ctx, m); err != nil {
		return err
	}
	d.printf("%s stored file message %d: %s, %d MiB, sha256 %s…, center %s, destination %s",
		nodeA, m.ID, m.File.Filename, m.File.Filesize>>20, m.File.FileChecksum[:16], m.File.CenterIdentifier, m.File.DestIdentifier)
	// Cut the first hop once the relay holds part of the file.
	var atCut int64
	waitFor(ctx, func() bool {
		for _, t := range r.c.Transfers() {
			if t.Offset > 0 {
				atCut = t.Offset
				return true
			}
		}
		return false
	})
	wireBefore := fileWire(d)
	r.a.CutLink(nodeC)
	d.printf("cut the %s-%s link with %d of %d MiB durable at %s", nodeA, nodeC, atCut>>20, demoFileSize>>20, nodeC)
	c, err := r.b.Consumer(relayAddr)
	if err != nil {
		return err
	}
	// The rest of the file crosses two hops: on a busy machine (a test
	// run with the race detector) that takes longer than a message wait.
	dl, err := receiveWithin(ctx, c, fileTimeout)
	if err != nil {
		return d.check(false, "the file reached "+nodeB, err.Error())
	}
	dl.Ack()
	got, err := fileSHA256(dl.File.ReceivedFilePath)
	if err != nil {
		return err
	}
	d.printf("%s got file message %d: %s at %s", nodeB, dl.ID, dl.File.Filename, dl.File.ReceivedFilePath)
	if err := d.check(got == sum && dl.File.FileChecksum == sum, "its SHA-256 at "+nodeB+" is the source's", fmt.Sprintf("got %s, want %s", got, sum)); err != nil {
		return err
	}
	resent := fileWire(d) - wireBefore
	d.printf("%s sent %d MiB after the cut, for %d MiB that %s did not hold yet", nodeA, resent>>20, (demoFileSize-atCut)>>20, nodeC)
	if err := d.check(resent <= demoFileSize-atCut+(demoFileSize-atCut)/10+int64(8<<20),
		"the transfer resumed where the relay stood; it did not start again", fmt.Sprintf("%d bytes after the cut", resent)); err != nil {
		return err
	}
	held := waitFor(ctx, func() bool {
		ents, _ := os.ReadDir(filepath.Join(r.c.DataDir(), "spool", "held"))
		return len(ents) == 0
	})
	return d.check(held, nodeC+" freed its copy once "+nodeB+" had the file", "held files remain")
}

// fileWire is the file bytes A's links put on the wire so far.
func fileWire(d *demo) int64 {
	var w int64
	for _, l := range d.relay.a.Links() {
		w += l.Files.Wire
	}
	return w
}

func writeDemoFile(path string, size int64) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

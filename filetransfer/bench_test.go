package filetransfer

import (
	"fmt"
	"log/slog"
	"testing"
)

// BenchmarkIncomingWrite appends 1 MiB chunks to an Incoming (write and
// running SHA-256), with a Sync every syncEvery chunks: every chunk is the
// worst case of a receiver that acks each one, 16 is a window of 16 MiB.
// A transfer is aborted and begun again every 64 MiB, outside the timer,
// so the benchmark does not fill the disk.
func BenchmarkIncomingWrite(b *testing.B) {
	const chunk, perFile = 1 << 20, 64
	data := randomBytes(b, chunk)
	info := infoOf("bench.bin", make([]byte, 0))
	info.Size = chunk * perFile
	for _, syncEvery := range []int{1, 16} {
		b.Run(fmt.Sprintf("sync-every-%dMiB", syncEvery), func(b *testing.B) {
			s, err := OpenSpool(b.TempDir(), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(chunk)
			var in *Incoming
			n := 0
			for b.Loop() {
				if n%perFile == 0 {
					b.StopTimer()
					if in != nil {
						in.Abort("benchmark")
					}
					var err error
					if in, err = s.Begin("bench", info); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := in.Write(int64(n%perFile)*chunk, data); err != nil {
					b.Fatal(err)
				}
				n++
				if n%syncEvery == 0 {
					if err := in.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			in.Abort("benchmark")
		})
	}
}

// BenchmarkDescribe hashes a 64 MiB file (from the page cache after the
// first run): the cost of announcing a file.
func BenchmarkDescribe(b *testing.B) {
	const size = 64 << 20
	path := writeFile(b, b.TempDir(), "bench.bin", randomBytes(b, size))
	b.SetBytes(size)
	for b.Loop() {
		if _, err := Describe(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSourceReadChunk reads a 64 MiB file in 1 MiB chunks, verifying
// every 16: the sender's side of a transfer, without the network.
func BenchmarkSourceReadChunk(b *testing.B) {
	const size, chunk = 64 << 20, 1 << 20
	path := writeFile(b, b.TempDir(), "bench.bin", randomBytes(b, size))
	info, err := Describe(path)
	if err != nil {
		b.Fatal(err)
	}
	src, err := OpenSource(path, info)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	buf := make([]byte, chunk)
	b.SetBytes(chunk)
	n := 0
	for b.Loop() {
		if _, err := src.ReadChunk(int64(n%(size/chunk))*chunk, buf); err != nil {
			b.Fatal(err)
		}
		if n++; n%16 == 0 {
			if err := src.Verify(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

package session

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkDataThroughput streams b.N Data packets of 128 bytes over one
// session on a real loopback TCP connection, with a window of 1000 and a
// cumulative ack every 100 packets, as sender and receiver will. It reports
// msgs/s from the first SendData to the last ack.
func BenchmarkDataThroughput(b *testing.B) {
	const window, ackEvery = 1000, 100
	c, s := tcpPair(b, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(b, c, s, "orders", window, window)
	ctx := context.Background()
	n := uint64(b.N)
	errc := make(chan error, 1)
	go func() {
		for seq := uint64(1); seq <= n; seq++ {
			d, err := rcv.Recv(ctx)
			if err != nil {
				errc <- err
				return
			}
			if d.Seq%ackEvery == 0 || d.Seq == n {
				if err := rcv.Ack(d.Seq); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- nil
	}()
	msg := make([]byte, 128)
	acks := snd.Acks()
	var acked uint64
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for seq := uint64(1); seq <= n; seq++ {
		for seq-acked > window {
			acked = (<-acks).Seq
		}
		if err := snd.SendData(ctx, seq, msg); err != nil {
			b.Fatal(err)
		}
	}
	for acked < n {
		a, ok := <-acks
		if !ok {
			b.Fatal(snd.Err())
		}
		acked = a.Seq
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDataThroughputSessions is BenchmarkDataThroughput with 8
// sessions sharing the connection, each with its own sender and receiver
// goroutine.
func BenchmarkDataThroughputSessions(b *testing.B) {
	const sessions, window = 8, 1000
	c, s := tcpPair(b, testConfig("plant-7"), testConfig("hub-1"))
	ctx := context.Background()
	per := uint64(b.N/sessions + 1)
	type pairS struct{ snd, rcv *Session }
	ps := make([]pairS, sessions)
	for i := range ps {
		ps[i].snd, ps[i].rcv = openPair(b, c, s, fmt.Sprint("q", i), window, window)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			for seq := uint64(1); seq <= per; seq++ {
				d, err := p.rcv.Recv(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if d.Seq%100 == 0 || d.Seq == per {
					_ = p.rcv.Ack(d.Seq)
				}
			}
		})
		wg.Go(func() {
			msg := make([]byte, 128)
			var acked uint64
			for seq := uint64(1); seq <= per; seq++ {
				for seq-acked > window {
					acked = (<-p.snd.Acks()).Seq
				}
				if err := p.snd.SendData(ctx, seq, msg); err != nil {
					b.Error(err)
					return
				}
			}
			for acked < per {
				acked = (<-p.snd.Acks()).Seq
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(per*sessions)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkReadFrameDecodeData is the receive path's codec cost per frame,
// without the socket.
func BenchmarkReadFrameDecodeData(b *testing.B) {
	one := frame(TypeData, 0, 1, Data{Seq: 1, Message: make([]byte, 128)})
	in := bytes.Repeat(one, 1000)
	r := bytes.NewReader(in)
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(one)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%1000 == 0 {
			r.Reset(in)
		}
		_, p, err := ReadFrame(r, DefaultMaxFrame, buf)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeData(p); err != nil {
			b.Fatal(err)
		}
	}
}

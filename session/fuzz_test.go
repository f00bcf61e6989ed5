package session

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// The fuzz targets feed arbitrary bytes to every decoder. A decoder must
// never panic, and whatever it accepts must be canonical: re-encoding gives
// back the input. Seeds are the packets of packetCases and the corpora under
// testdata/fuzz/<Target>.

func fuzzDecoder[P appender](f *testing.F, decode func([]byte) (P, error), name string) {
	for _, tc := range packetCases() {
		if tc.name == name || len(tc.name) > len(name) && tc.name[:len(name)+1] == name+"/" {
			enc := tc.pkt.AppendBinary(nil)
			f.Add(enc)
			f.Add(enc[:len(enc)/2])
			f.Add(append(enc, 0))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		x, err := decode(p)
		if err != nil {
			return
		}
		if enc := x.AppendBinary(nil); !bytes.Equal(enc, p) {
			t.Fatalf("%s is not canonical:\n in  %x\n out %x", name, p, enc)
		}
	})
}

func FuzzHello(f *testing.F)         { fuzzDecoder(f, DecodeHello, "Hello") }
func FuzzAuth(f *testing.F)          { fuzzDecoder(f, DecodeAuth, "Auth") }
func FuzzAuthOK(f *testing.F)        { fuzzDecoder(f, DecodeAuthOK, "AuthOK") }
func FuzzErrorPacket(f *testing.F)   { fuzzDecoder(f, DecodeErrorPacket, "Error") }
func FuzzSessionCreate(f *testing.F) { fuzzDecoder(f, DecodeSessionCreate, "SessionCreate") }
func FuzzTopicSessionCreate(f *testing.F) {
	fuzzDecoder(f, DecodeTopicSessionCreate, "TopicSessionCreate")
}
func FuzzSessionCreateResponse(f *testing.F) {
	fuzzDecoder(f, DecodeSessionCreateResponse, "SessionCreateResponse")
}
func FuzzData(f *testing.F)         { fuzzDecoder(f, DecodeData, "Data") }
func FuzzDataAck(f *testing.F)      { fuzzDecoder(f, DecodeDataAck, "DataAck") }
func FuzzRefuse(f *testing.F)       { fuzzDecoder(f, DecodeRefuse, "Refuse") }
func FuzzSessionClose(f *testing.F) { fuzzDecoder(f, DecodeSessionClose, "SessionClose") }
func FuzzPing(f *testing.F)         { fuzzDecoder(f, DecodePing, "Ping") }
func FuzzDeliver(f *testing.F)      { fuzzDecoder(f, DecodeDeliver, "Deliver") }
func FuzzCredit(f *testing.F)       { fuzzDecoder(f, DecodeCredit, "Credit") }
func FuzzSettle(f *testing.F)       { fuzzDecoder(f, DecodeSettle, "Settle") }

// FuzzReadFrame reads frames from arbitrary input until an error. It must
// never panic or return a payload over the limit, and every frame it
// returns re-encodes to the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	for _, tc := range packetCases() {
		f.Add(frame(TypeData, 0, 1, tc.pkt))
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{12, 0, 0, 0, 0, 1, 0x80, 0, 0, 0})
	f.Add(append(frame(TypePing, 0, 0, Ping{Nonce: 1}), frame(TypePong, 0, 0, Ping{Nonce: 1})...))
	const max = 1 << 12
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		buf := make([]byte, 0, 64)
		var out []byte
		for {
			h, p, err := ReadFrame(r, max, buf)
			if err != nil {
				break
			}
			if h.Length > max || uint32(len(p)) != h.Length {
				t.Fatalf("header %+v with a payload of %d bytes", h, len(p))
			}
			out = append(AppendHeader(out, h), p...)
		}
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("frames re-encode to %x, input %x", out, in)
		}
	})
}

// FuzzConn feeds arbitrary frames to an authenticated connection, either
// side (the first byte chooses), with an application that accepts every
// session and acks every packet. It must never panic or hang, and the
// connection must shut down cleanly.
func FuzzConn(f *testing.F) {
	create := frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Name: "x", Address: "q", Window: 2})
	data := frame(TypeData, 0, 1, Data{Seq: 1, Message: []byte("m")})
	f.Add(append([]byte{0}, create...))
	f.Add(append(append([]byte{0}, create...), data...))
	f.Add(append(append(append([]byte{0}, create...), data...), frame(TypeSessionClose, 0, 1, SessionClose{Reason: "bye"})...))
	f.Add(append([]byte{0}, frame(TypePing, 0, 0, Ping{Nonce: 9})...))
	f.Add(append([]byte{1}, frame(TypeSessionCreateResponse, 0, 1, SessionCreateResponse{Version: 1, Window: 2})...))
	f.Add(append([]byte{1}, frame(TypeDataAck, 0, 1, DataAck{Seq: 1})...))
	f.Add([]byte{0, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		fuzzConn(t, in[0]&1 == 1, in[1:])
	})
}

func fuzzConn(t *testing.T, clientSide bool, in []byte) {
	cn, sn := net.Pipe()
	var c *Conn
	var err error
	if clientSide {
		go func() {
			if _, err := rawServer(t, sn, Hello{MinVersion: 1, MaxVersion: 1, Name: "fuzz"}, AuthOK{}); err != nil {
				sn.Close()
			}
		}()
		c, err = Client(context.Background(), cn, testConfig("plant-7"))
		cn = sn // the raw side
	} else {
		c, err = startServer(t, sn, testConfig("hub-1"), func() { rawClient(t, cn, "fuzz") })
	}
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(io.Discard, cn) })
	if clientSide {
		wg.Go(func() {
			if s, err := c.Open(context.Background(), "q", 2); err == nil {
				for range s.Acks() {
				}
			}
		})
	} else {
		wg.Go(func() { acceptAll(c, &wg) })
	}
	_, _ = cn.Write(in)
	cn.Close()
	<-c.Done()
	c.Close()
	wg.Wait()
}

func acceptAll(c *Conn, wg *sync.WaitGroup) {
	ctx := context.Background()
	for {
		s, err := c.Accept(ctx)
		if err != nil {
			return
		}
		if s.Accept(2) != nil {
			continue
		}
		wg.Go(func() {
			for {
				d, err := s.Recv(ctx)
				if err != nil {
					return
				}
				_ = s.Ack(d.Seq)
			}
		})
	}
}

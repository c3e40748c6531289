package gangnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []hello{
		{Gang: "q3v7kz2mxa4bnc6dpe8f", From: 0, To: 1},
		{Gang: "g", From: 252, To: 253},
		{Gang: strings.Repeat("x", MaxIDLen), From: maxRank, To: maxRank},
	} {
		got, err := readHello(bytes.NewReader(h.marshal()))
		if err != nil || got != h {
			t.Errorf("%+v came back as %+v, %v", h, got, err)
		}
	}
}

func TestHelloRefusesMalformed(t *testing.T) {
	good := hello{Gang: "job", From: 0, To: 1}.marshal()
	body := func(b ...byte) []byte {
		out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
		return append(out, b...)
	}
	for name, in := range map[string][]byte{
		"version 2":   body(2, 0, 1, 'j'),
		"no gang":     body(1, 0, 1),
		"empty":       body(),
		"rank over":   body(append([]byte{1}, binary.AppendUvarint(nil, maxRank+1)...)...),
		"long gang":   body(append([]byte{1, 0, 1}, strings.Repeat("g", MaxIDLen+1)...)...),
		"cut varint":  body(1, 0x80),
		"over length": binary.BigEndian.AppendUint16(nil, maxHello+1),
	} {
		if _, err := readHello(bytes.NewReader(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := readHello(bytes.NewReader(good[:len(good)-1])); err == nil {
		t.Error("a cut hello was read")
	}
}

func TestFrames(t *testing.T) {
	pkts := [][]byte{packet(t, "10.31.0.1", "10.31.0.2", []byte("one")), packet(t, "10.31.0.1", "10.31.0.2", make([]byte, MTU-20))}
	var b []byte
	for _, p := range pkts {
		b = appendFrame(b, p)
	}
	r := newReader(bytes.NewReader(b))
	for _, want := range pkts {
		got, err := readFrame(r, MTU)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame of %d bytes: got %d, %v", len(want), len(got), err)
		}
	}
	if _, err := readFrame(r, MTU); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
	for name, c := range map[string]struct {
		in   []byte
		want error
	}{
		"over the MTU": {appendFrame(nil, make([]byte, 1501)), ErrMalformed},
		"empty":        {[]byte{0, 0}, ErrMalformed},
		"cut header":   {[]byte{0}, io.ErrUnexpectedEOF},
		"cut packet":   {appendFrame(nil, make([]byte, 100))[:50], io.ErrUnexpectedEOF},
	} {
		if _, err := readFrame(newReader(bytes.NewReader(c.in)), 1500); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestIPv4Header(t *testing.T) {
	p := packet(t, "10.31.0.1", "10.31.0.2", []byte("x"))
	if src, dst, ok := ipv4(p); !ok || src != [4]byte{10, 31, 0, 1} || dst != [4]byte{10, 31, 0, 2} {
		t.Fatalf("ipv4: %v %v %v", src, dst, ok)
	}
	bad := map[string][]byte{
		"short":        p[:19],
		"ipv6":         append([]byte{0x60}, p[1:]...),
		"ihl 4":        append([]byte{0x44}, p[1:]...),
		"ihl past end": append([]byte{0x4f}, p[1:21]...),
		"long total":   append(p[:len(p):len(p)], 0),
		"short total":  p[:len(p)-1],
	}
	for name, b := range bad {
		if _, _, ok := ipv4(b); ok {
			t.Errorf("%s passed", name)
		}
	}
}

// FuzzHello feeds the hello decoder what a peer may send: it must never
// panic, and what it accepts must encode back to the same bytes.
func FuzzHello(f *testing.F) {
	f.Add(hello{Gang: "q3v7kz2mxa4bnc6dpe8f", From: 0, To: 1}.marshal())
	f.Add(hello{Gang: strings.Repeat("x", MaxIDLen), From: maxRank, To: 3}.marshal())
	f.Add([]byte{0, 3, 1, 0x80, 0x80})
	f.Add([]byte{0xff, 0xff})
	f.Add([]byte{0, 4, 2, 0, 1, 'g'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := readHello(bytes.NewReader(in))
		if err != nil {
			return
		}
		if h.From < 0 || h.From > maxRank || h.To < 0 || h.To > maxRank || h.Gang == "" || len(h.Gang) > MaxIDLen {
			t.Fatalf("accepted %+v", h)
		}
		again, err := readHello(bytes.NewReader(h.marshal()))
		if err != nil || again != h {
			t.Fatalf("%+v did not survive a round trip: %+v, %v", h, again, err)
		}
	})
}

// FuzzFrames feeds a stream's reader what a peer may send, through the
// whole receive path of a Net (frame, header check, delivery): it must
// never panic, and nothing it delivers may break the rules.
func FuzzFrames(f *testing.F) {
	var seed []byte
	seed = appendFrame(seed, packet(f, "10.31.0.2", "10.31.0.1", []byte("hello")))
	seed = appendFrame(seed, packet(f, "10.31.0.3", "10.31.0.1", []byte("spoofed")))
	seed = appendFrame(seed, packet(f, "10.31.0.2", "10.31.0.9", []byte("elsewhere")))
	f.Add(seed)
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0xff, 0x45})
	f.Add([]byte{0, 20, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 31, 0, 2, 10, 31, 0, 1})
	f.Add([]byte{0, 1, 0x60})
	f.Fuzz(func(t *testing.T, in []byte) {
		p := testPlan(t, 3, 0)
		n, part := forwardingNet(t, p)
		s := &memStream{Reader: bytes.NewReader(in), Writer: io.Discard, close: func() {}}
		c, _ := n.attach(n.links[1], s, newReader(s))
		got := drain(t, part, c.done)
		for _, pkt := range got {
			src, dst, ok := ipv4(pkt)
			if !ok || src != p.addrs[1] || dst != p.addrs[0] {
				t.Fatalf("delivered % x", pkt)
			}
		}
		if st := n.Stats(); st.In.Packets != uint64(len(got)) {
			t.Fatalf("counted %d packets in, delivered %d", st.In.Packets, len(got))
		}
	})
}

// drain collects the packets written to a part's end until done is
// closed, and then what is left.
func drain(t *testing.T, part *os.File, done <-chan struct{}) [][]byte {
	rc, err := part.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	buf := make([]byte, MTU+1)
	read := func(fd uintptr) (bool, error) {
		m, err := unix.Read(int(fd), buf)
		if err != nil {
			return false, err
		}
		got = append(got, bytes.Clone(buf[:m]))
		return true, nil
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			var rerr error
			err := rc.Read(func(fd uintptr) bool {
				_, rerr = read(fd)
				return rerr != unix.EAGAIN
			})
			if err != nil || rerr != nil {
				return
			}
		}
	}()
	<-done
	// Every delivery was written before the stream's reader ended.
	_ = part.SetReadDeadline(time.Now())
	<-stopped
	_ = rc.Control(func(fd uintptr) {
		for {
			if ok, _ := read(fd); !ok {
				return
			}
		}
	})
	return got
}

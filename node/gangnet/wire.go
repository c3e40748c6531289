package gangnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// What travels on a gang stream. The dialer (the lower rank) opens with a
// hello naming the gang and both ranks; the other side answers with one
// byte, a reply code. Then each side writes frames, one IPv4 packet each:
//
//	hello: uint16 length | version (1) | uvarint from | uvarint to | gang ID
//	frame: uint16 length | packet
//
// A uint16 is enough for a frame: IPv4's own total-length field is 16 bits,
// so no packet is longer than 65,535 bytes, and the MTU bounds it further.
// The sender reads each packet from the TUN device just behind room for
// its length, so that a frame leaves in one write with no copy; the
// receiver hands the TUN device the packet where it lies in its buffered
// reader's buffer.

// ErrMalformed is wrapped by the decoders' errors: the peer sent something
// that is not a hello or a frame. The stream is reset.
var ErrMalformed = errors.New("malformed gang stream")

const (
	helloVersion = 1
	// maxHello bounds a hello's body: the version, two uvarints of at most
	// maxRank, and a gang ID.
	maxHello = 1 + 2*binary.MaxVarintLen32 + MaxIDLen
	// maxRank bounds a rank in a hello, far above any subnet's room.
	maxRank = 1 << 20
)

// Reply codes, the byte that answers a hello.
const (
	replyOK byte = iota
	// replyNoGang: no Net of that gang is open here, or not yet. The dialer
	// tries again: the other daemon may not have started its part yet.
	replyNoGang
	// replyRefused: the ranks do not fit this Net, or the dialing peer is
	// not the member named for its rank.
	replyRefused
)

// hello opens a stream.
type hello struct {
	Gang     string
	From, To int // the dialer's rank, and the rank it dials
}

func (h hello) marshal() []byte {
	b := make([]byte, 2, 2+maxHello)
	b = append(b, helloVersion)
	b = binary.AppendUvarint(b, uint64(h.From))
	b = binary.AppendUvarint(b, uint64(h.To))
	b = append(b, h.Gang...)
	binary.BigEndian.PutUint16(b, uint16(len(b)-2))
	return b
}

// readHello reads one hello from r, reading no further than its end.
func readHello(r io.Reader) (hello, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return hello{}, err
	}
	size := int(binary.BigEndian.Uint16(n[:]))
	if size > maxHello {
		return hello{}, fmt.Errorf("%w: hello of %d bytes, over %d", ErrMalformed, size, maxHello)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return hello{}, err
	}
	return parseHello(body)
}

// parseHello decodes a hello's body, strictly: a newer or hostile peer's
// padding is refused, not half-read.
func parseHello(b []byte) (hello, error) {
	if len(b) < 1 || b[0] != helloVersion {
		return hello{}, fmt.Errorf("%w: hello version", ErrMalformed)
	}
	b = b[1:]
	var ranks [2]int
	for i := range ranks {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > maxRank {
			return hello{}, fmt.Errorf("%w: hello rank", ErrMalformed)
		}
		ranks[i] = int(v)
		b = b[n:]
	}
	if len(b) == 0 || len(b) > MaxIDLen {
		return hello{}, fmt.Errorf("%w: hello gang ID of %d bytes", ErrMalformed, len(b))
	}
	return hello{Gang: string(b), From: ranks[0], To: ranks[1]}, nil
}

// frameHeader is the length in front of each packet on a stream.
const frameHeader = 2

// appendFrame appends pkt to b as one frame.
func appendFrame(b, pkt []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(pkt)))
	return append(b, pkt...)
}

// readFrame returns the next frame's packet. It is read through r's buffer
// and not copied, so it is valid only until r is next read; r's buffer must
// hold a frame of mtu bytes. A frame that is empty or longer than mtu is
// malformed: no honest daemon sends one.
func readFrame(r *bufio.Reader, mtu int) ([]byte, error) {
	hdr, err := r.Peek(frameHeader)
	if err != nil {
		if err == io.EOF && r.Buffered() > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(hdr))
	if size == 0 || size > mtu {
		return nil, fmt.Errorf("%w: frame of %d bytes, MTU %d", ErrMalformed, size, mtu)
	}
	b, err := r.Peek(frameHeader + size)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	// Discard only moves past what Peek returned: b stays as it is until
	// the next read fills the buffer again.
	_, _ = r.Discard(frameHeader + size)
	return b[frameHeader:], nil
}

package gangnet

import (
	"encoding/binary"
	"sync/atomic"
)

// DropReason names why a packet was not forwarded. Every drop is counted
// under one (Stats.Drops), so that a part that cannot reach another can be
// told why.
type DropReason string

const (
	// DropNotIPv4: not a well-formed IPv4 packet (IPv6 among them), or a
	// header whose total length is not the packet's.
	DropNotIPv4 DropReason = "not-ipv4"
	// DropSpoofed: leaving the sandbox with a source other than its own
	// address.
	DropSpoofed DropReason = "spoofed-source"
	// DropNotMember: leaving the sandbox for an address that is no other
	// member's (outside the subnet, a free address in it, broadcast,
	// multicast, or its own).
	DropNotMember DropReason = "not-member"
	// DropNoLink: for a member whose stream is not up (yet, or any more).
	DropNoLink DropReason = "no-link"
	// DropQueueFull: the stream to that member is behind; TCP inside
	// retransmits, as it would after a full router queue.
	DropQueueFull DropReason = "queue-full"
	// DropWrongSource: arriving on a member's stream with a source other
	// than that member's address.
	DropWrongSource DropReason = "wrong-source"
	// DropWrongDest: arriving for an address other than this part's.
	DropWrongDest DropReason = "wrong-destination"
	// DropTunWrite: the kernel refused to take an arriving packet.
	DropTunWrite DropReason = "tun-write"
)

var dropReasons = [...]DropReason{DropNotIPv4, DropSpoofed, DropNotMember, DropNoLink, DropQueueFull, DropWrongSource, DropWrongDest, DropTunWrite}

// Stats counts what a Net forwarded and dropped since Open.
type Stats struct {
	// Out: packets from this part to the others, written to their streams.
	Out Counts
	// In: packets from the others, written into this part's interface.
	In Counts
	// Drops by reason; a reason with none is absent.
	Drops map[DropReason]uint64
	// Refused counts the streams refused for this gang: a hello whose
	// ranks do not fit, or from a peer not named for its rank.
	Refused uint64
	// Links is how many members' streams are up, of Members-1.
	Links int
}

// Counts is a packet and byte count.
type Counts struct {
	Packets, Bytes uint64
}

// counters are a Net's Stats as they run.
type counters struct {
	outPackets, outBytes atomic.Uint64
	inPackets, inBytes   atomic.Uint64
	drops                [len(dropReasons)]atomic.Uint64
	refused              atomic.Uint64
}

func (c *counters) drop(r DropReason) {
	for i, d := range dropReasons {
		if d == r {
			c.drops[i].Add(1)
			return
		}
	}
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Out:     Counts{c.outPackets.Load(), c.outBytes.Load()},
		In:      Counts{c.inPackets.Load(), c.inBytes.Load()},
		Drops:   map[DropReason]uint64{},
		Refused: c.refused.Load(),
	}
	for i, d := range dropReasons {
		if v := c.drops[i].Load(); v > 0 {
			s.Drops[d] = v
		}
	}
	return s
}

// ipv4 returns the source and destination of p, if p is one well-formed
// IPv4 packet: version 4, a header of at least 20 bytes that fits, and a
// total length that is exactly p's. Fragments pass: they carry both
// addresses, and the kernel inside reassembles them.
func ipv4(p []byte) (src, dst [4]byte, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return src, dst, false
	}
	if ihl := int(p[0]&0x0f) * 4; ihl < 20 || ihl > len(p) {
		return src, dst, false
	}
	if int(binary.BigEndian.Uint16(p[2:4])) != len(p) {
		return src, dst, false
	}
	copy(src[:], p[12:16])
	copy(dst[:], p[16:20])
	return src, dst, true
}

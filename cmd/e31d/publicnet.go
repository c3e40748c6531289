package main

import (
	"fmt"
	"net"

	manet "github.com/multiformats/go-multiaddr/net"
)

// countAsPublic makes libp2p count the addresses of each network as public.
// libp2p hole-punches only towards public addresses, and AutoNAT tests only
// those, so on a network whose "internet" between sites is itself a private
// range (a campus or company WAN on 10/8, or a test bed of network
// namespaces) nothing behind a NAT could be reached without this. Only the
// named networks change: the rest of their private block stays private.
//
// manet.Private4 is the library's process-wide list; the daemon sets it once
// here, before any host exists, and never again.
func countAsPublic(cidrs []string) error {
	for _, s := range cidrs {
		_, hole, err := net.ParseCIDR(s)
		if err != nil || hole.IP.To4() == nil {
			return fmt.Errorf("--nat-public-net %q: want an IPv4 network such as 10.31.0.0/24", s)
		}
		if hole.IP.IsLoopback() || hole.IP.IsLinkLocalUnicast() {
			return fmt.Errorf("--nat-public-net %q: loopback and link-local addresses are never public", s)
		}
		found := false
		var next []*net.IPNet
		for _, b := range manet.Private4 {
			if !contains(b, hole) {
				next = append(next, b)
				continue
			}
			found = true
			next = append(next, subtract(b, hole)...)
		}
		if !found {
			return fmt.Errorf("--nat-public-net %q: not inside a private range (it is public already)", s)
		}
		manet.Private4 = next
	}
	return nil
}

// contains reports whether network outer holds all of inner.
func contains(outer, inner *net.IPNet) bool {
	ob, _ := outer.Mask.Size()
	ib, _ := inner.Mask.Size()
	return ib >= ob && outer.Contains(inner.IP)
}

// subtract returns block without hole (which it contains), as the sibling
// of hole's prefix at each length from block's down to hole's.
func subtract(block, hole *net.IPNet) []*net.IPNet {
	if block.IP.To4() != nil {
		block = &net.IPNet{IP: block.IP.To4(), Mask: block.Mask[len(block.Mask)-4:]}
	}
	hip := hole.IP.To4()
	bb, _ := block.Mask.Size()
	hb, _ := hole.Mask.Size()
	if block.String() == hole.String() {
		return nil
	}
	var out []*net.IPNet
	for l := bb + 1; l <= hb; l++ {
		mask := net.CIDRMask(l, 32)
		sib := make(net.IP, 4)
		copy(sib, hip.Mask(mask))
		// Flip the bit that tells the two halves at this length apart.
		bit := l - 1
		sib[bit/8] ^= 0x80 >> (bit % 8)
		out = append(out, &net.IPNet{IP: sib, Mask: mask})
	}
	return out
}

package gangnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultSubnet is the gang network's subnet when Config.Subnet is unset.
// Every gang has its own namespaces, so every gang may use the same one.
var DefaultSubnet = netip.MustParsePrefix("10.31.0.0/24")

// MaxIDLen bounds a gang's and a lease's ID: both travel in the handshake
// and the lease names a file under /run/netns.
const MaxIDLen = 128

// ErrConfig is wrapped by Open's error for a Config that cannot work.
var ErrConfig = errors.New("gang network config")

// Member is one part of a gang: its rank and the daemon that runs it.
type Member struct {
	Rank int
	Peer peer.ID
}

// Config says which gang network Open makes and which part of it is this
// daemon's.
type Config struct {
	// Gang is the gang's ID (the job's). The handshake names it, so that a
	// daemon that runs parts of several gangs routes each stream to the
	// right one.
	Gang string
	// Lease is this part's lease ID. The namespace is e31-<Lease> under
	// /run/netns, so that two parts of two gangs on one daemon never
	// collide, and Sweep can tell the namespaces it owns by their prefix.
	Lease string
	// Self is this part's rank.
	Self int
	// Members are every part, in rank order (Members[i].Rank == i), Self
	// among them, each on a daemon of its own: the daemons are told apart
	// by peer, and a daemon cannot dial itself.
	Members []Member
	// Subnet holds the gang's addresses: rank r has the (r+1)th address
	// (10.31.0.1 for rank 0 in the default). Zero means DefaultSubnet.
	Subnet netip.Prefix
}

// plan is a checked Config, with the addresses worked out.
type plan struct {
	Config
	base  uint32 // the subnet's network address
	bits  int
	addrs [][4]byte // by rank
}

func (c Config) check(self peer.ID) (plan, error) {
	p := plan{Config: c}
	if p.Subnet == (netip.Prefix{}) {
		p.Subnet = DefaultSubnet
	}
	bad := func(format string, args ...any) (plan, error) {
		return plan{}, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Gang == "" || len(c.Gang) > MaxIDLen:
		return bad("gang ID %q: want 1 to %d bytes", c.Gang, MaxIDLen)
	case !leaseOK(c.Lease):
		return bad("lease ID %q: want 1 to %d of [A-Za-z0-9._-], not . or ..", c.Lease, MaxIDLen)
	case !p.Subnet.Addr().Is4() || !p.Subnet.IsValid():
		return bad("subnet %s is not IPv4", p.Subnet)
	case len(c.Members) < 2:
		return bad("%d members, want at least 2", len(c.Members))
	case c.Self < 0 || c.Self >= len(c.Members):
		return bad("self rank %d of %d members", c.Self, len(c.Members))
	}
	p.Subnet = p.Subnet.Masked()
	p.bits = p.Subnet.Bits()
	// The network address and the broadcast address are nobody's.
	if hosts := uint64(1)<<(32-p.bits) - 2; p.bits > 30 || uint64(len(c.Members)) > hosts {
		return bad("subnet %s has no room for %d members", p.Subnet, len(c.Members))
	}
	a4 := p.Subnet.Addr().As4()
	p.base = binary.BigEndian.Uint32(a4[:])
	seen := map[peer.ID]int{}
	for i, m := range c.Members {
		j, dup := seen[m.Peer]
		seen[m.Peer] = i
		switch {
		case m.Rank != i:
			return bad("member %d has rank %d: want rank order", i, m.Rank)
		case m.Peer == "":
			return bad("member %d has no peer", i)
		case i == c.Self && m.Peer != self:
			return bad("self rank %d names peer %s, not this host %s", i, m.Peer, self)
		case i != c.Self && m.Peer == self:
			return bad("rank %d is this host too: it cannot dial itself", i)
		case dup:
			return bad("ranks %d and %d are both on peer %s", j, i, m.Peer)
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], p.base+uint32(i)+1)
		p.addrs = append(p.addrs, a)
	}
	return p, nil
}

// leaseOK keeps a lease ID a plain file name.
func leaseOK(s string) bool {
	if s == "" || len(s) > MaxIDLen || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// rankOf returns the rank whose address a is, or -1.
func (p *plan) rankOf(a [4]byte) int {
	off := binary.BigEndian.Uint32(a[:]) - p.base
	if off == 0 || off > uint32(len(p.addrs)) {
		return -1
	}
	return int(off) - 1
}

// prefix is rank r's address with the subnet's length, as the interface
// holds it.
func (p *plan) prefix(r int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4(p.addrs[r]), p.bits)
}

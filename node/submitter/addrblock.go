package submitter

import (
	"net"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Replicas of a check go to providers that do not share an owner where
// that can be told: two providers whose offers list public addresses in
// one /24 (IPv4) or /48 (IPv6) are taken for one owner's machines, whose
// answers agree whether or not the work was done. Private and loopback
// addresses say nothing of an owner and are left out.

// sameBlock reports whether two lists of multiaddrs share a public
// address block.
func sameBlock(a, b []string) bool {
	blocks := map[string]bool{}
	for _, s := range a {
		if k := blockOf(s); k != "" {
			blocks[k] = true
		}
	}
	for _, s := range b {
		if k := blockOf(s); k != "" && blocks[k] {
			return true
		}
	}
	return false
}

// blockOf is the public address block of a multiaddr, "" for none.
func blockOf(s string) string {
	m, err := ma.NewMultiaddr(s)
	if err != nil || !manet.IsPublicAddr(m) {
		return ""
	}
	ip, err := manet.ToIP(m)
	if err != nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.Mask(net.CIDRMask(24, 32)).String() + "/24"
	}
	return ip.Mask(net.CIDRMask(48, 128)).String() + "/48"
}

package main

import (
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

func TestCountAsPublic(t *testing.T) {
	saved := manet.Private4
	t.Cleanup(func() { manet.Private4 = saved })

	if err := countAsPublic([]string{"10.31.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	for addr, public := range map[string]bool{
		"/ip4/10.31.0.1/tcp/4001":    true,
		"/ip4/10.31.0.255/tcp/4001":  true,
		"/ip4/10.31.1.1/tcp/4001":    false,
		"/ip4/10.30.255.1/tcp/4001":  false,
		"/ip4/10.0.0.1/tcp/4001":     false,
		"/ip4/10.255.0.1/tcp/4001":   false,
		"/ip4/192.168.31.2/tcp/4001": false,
		"/ip4/127.0.0.1/tcp/4001":    false,
	} {
		if got := manet.IsPublicAddr(ma.StringCast(addr)); got != public {
			t.Errorf("IsPublicAddr(%s) = %v, want %v", addr, got, public)
		}
	}
	for _, bad := range []string{"8.8.8.0/24", "127.0.0.0/8", "169.254.1.0/24", "fc00::/7", "10.31.0.0"} {
		if err := countAsPublic([]string{bad}); err == nil {
			t.Errorf("countAsPublic(%s) accepted", bad)
		}
	}
}

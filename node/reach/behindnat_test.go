package reach

import "testing"

// A host listening on a specific address is behind a NAT exactly when
// that address is private or loopback; any public one says it is not.
func TestBehindNAT(t *testing.T) {
	for _, c := range []struct {
		listen []string
		want   bool
	}{
		{[]string{"/ip4/192.168.1.20/tcp/4001"}, true},
		{[]string{"/ip4/10.0.0.5/udp/4001/quic-v1", "/ip4/127.0.0.1/tcp/4001"}, true},
		{[]string{"/ip4/192.168.1.20/tcp/4001", "/ip4/203.0.114.7/tcp/4001"}, false},
		{[]string{"/ip6/2001:4860::8888/tcp/4001"}, false},
		{[]string{"/ip6/fd00::1/tcp/4001"}, true},
	} {
		got, err := BehindNAT(c.listen)
		if err != nil {
			t.Fatalf("%v: %v", c.listen, err)
		}
		if got != c.want {
			t.Errorf("BehindNAT(%v) = %v, want %v", c.listen, got, c.want)
		}
	}
	if _, err := BehindNAT([]string{"not an address"}); err == nil {
		t.Error("BehindNAT took a listen address that is not one")
	}
}

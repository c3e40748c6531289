package submitter

import "testing"

func TestSameBlock(t *testing.T) {
	for _, c := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"/ip4/81.2.69.7/tcp/4001"}, []string{"/ip4/81.2.69.200/udp/4001/quic-v1"}, true},
		{[]string{"/ip4/81.2.69.7/tcp/4001"}, []string{"/ip4/81.2.70.7/tcp/4001"}, false},
		{[]string{"/ip6/2001:db8:1:2::1/tcp/1"}, []string{"/ip6/2001:db8:1:ffff::9/tcp/1"}, false}, // documentation range: not public
		{[]string{"/ip6/2a00:1450:4001:1::1/tcp/1"}, []string{"/ip6/2a00:1450:4001:ff::9/tcp/1"}, true},
		{[]string{"/ip6/2a00:1450:4001:1::1/tcp/1"}, []string{"/ip6/2a00:1450:4002:1::1/tcp/1"}, false},
		{[]string{"/ip4/127.0.0.1/tcp/1"}, []string{"/ip4/127.0.0.1/tcp/2"}, false},     // loopback says nothing of an owner
		{[]string{"/ip4/192.168.1.2/tcp/1"}, []string{"/ip4/192.168.1.3/tcp/1"}, false}, // nor a home network
		{[]string{"not an address"}, []string{"/ip4/8.8.8.8/tcp/1"}, false},
		{nil, []string{"/ip4/8.8.8.8/tcp/1"}, false},
	} {
		if got := sameBlock(c.a, c.b); got != c.want {
			t.Errorf("sameBlock(%v, %v) = %t, want %t", c.a, c.b, got, c.want)
		}
	}
}

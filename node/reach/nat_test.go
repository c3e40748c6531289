package reach

import "testing"

func TestNATIsOffOnLoopbackUnlessAsked(t *testing.T) {
	for _, c := range []struct {
		mode   string
		listen []string
		want   bool
	}{
		{NATAuto, []string{"/ip4/127.0.0.1/tcp/0"}, false},
		{NATAuto, []string{"/ip4/127.0.0.1/tcp/0", "/ip6/::1/udp/0/quic-v1"}, false},
		{NATAuto, []string{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/tcp/4031"}, true},
		{NATAuto, nil, true},
		{"", []string{"/ip4/10.0.0.7/tcp/4031"}, true},
		{NATOn, []string{"/ip4/127.0.0.1/tcp/0"}, true},
		{NATOff, []string{"/ip4/0.0.0.0/tcp/0"}, false},
	} {
		got, err := Traverse(c.mode, c.listen)
		if err != nil || got != c.want {
			t.Errorf("Traverse(%q, %v) = %t, %v; want %t", c.mode, c.listen, got, err, c.want)
		}
	}
	if _, err := Traverse("maybe", nil); err == nil {
		t.Error("a mode that is not auto, on or off was accepted")
	}
}

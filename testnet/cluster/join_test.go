package cluster

import (
	"encoding/json"
	"strings"
	"testing"
)

// nodes.json names each node's network and the e31d flags that join it
// through that node: without --network a daemon is on another network.
func TestJoinFlags(t *testing.T) {
	addr := "/ip4/127.0.0.1/tcp/40123/p2p/12D3KooWBoot"
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Network: "testnet"}, "--network testnet --bootstrap " + addr},
		{Options{Network: "lab", Shards: 4}, "--network lab --shards 4 --bootstrap " + addr},
	} {
		c := &Cluster{opts: tc.opts}
		n := &Node{Addrs: []string{addr}}
		n.Network, n.Join = c.opts.Network, c.joinFlags(n)
		if n.Join != tc.want {
			t.Errorf("join flags %q, want %q", n.Join, tc.want)
		}
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"network":"`+tc.opts.Network+`"`) || !strings.Contains(string(b), `"join":"`+tc.want+`"`) {
			t.Errorf("nodes.json entry %s lacks the network or the join flags", b)
		}
	}
}

package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

func TestShardPeersDecoders(t *testing.T) {
	if s, err := wire.DecodeShardPeersRequest([]byte(`{"shard":{"index":3,"count":8}}`)); err != nil || s != (p2p.Shard{Index: 3, Count: 8}) {
		t.Errorf("a good request: %v, %v", s, err)
	}
	for _, bad := range []string{`{"shard":{"index":8,"count":8}}`, `{"shard":{"index":0,"count":1}}`, `{"shard":{"index":0,"count":3}}`, `{"shard":{}}`, `{}`, `[]`} {
		if _, err := wire.DecodeShardPeersRequest([]byte(bad)); err == nil {
			t.Errorf("request %s accepted", bad)
		}
	}
	id := wiretest.SeededParty(t, 1).ID.String()
	good := wire.ShardPeersReply{Peers: []wire.ShardPeer{{ID: id, Addrs: []string{"/ip4/127.0.0.1/tcp/4001", "not an address"}}}}
	infos, err := wire.DecodeShardPeersReply(mustMarshal(t, good))
	if err != nil || len(infos) != 1 || infos[0].ID.String() != id || len(infos[0].Addrs) != 1 {
		t.Fatalf("a good reply: %v, %v", infos, err)
	}
	tooMany := wire.ShardPeersReply{}
	for range wire.MaxShardPeers + 1 {
		tooMany.Peers = append(tooMany.Peers, good.Peers[0])
	}
	if _, err := wire.DecodeShardPeersReply(mustMarshal(t, tooMany)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a reply of %d peers: %v", len(tooMany.Peers), err)
	}
	if _, err := wire.DecodeShardPeersReply([]byte(`{"peers":[{"id":"nope","addrs":["/ip4/127.0.0.1/tcp/1"]}]}`)); err == nil {
		t.Errorf("a reply naming a bad peer ID was accepted")
	}
	// A peer with no address that parses is left out.
	if infos, err := wire.DecodeShardPeersReply([]byte(`{"peers":[{"id":"` + id + `","addrs":["x"]}]}`)); err != nil || len(infos) != 0 {
		t.Errorf("a peer with no good address: %v, %v", infos, err)
	}
}

// What any peer may answer or ask on wire.ProtoShardPeers.
func FuzzShardPeers(f *testing.F) {
	id := wiretest.SeededParty(f, 1).ID.String()
	f.Add(mustMarshal(f, wire.ShardPeersRequest{Shard: p2p.Shard{Index: 1, Count: 4}}))
	f.Add(mustMarshal(f, wire.ShardPeersReply{Peers: []wire.ShardPeer{{ID: id, Addrs: []string{"/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1"}}}}))
	f.Add([]byte(`{"peers":[{"id":"` + id + `","addrs":["/dns4/a/tcp/1/p2p/` + id + `"]}]}`))
	f.Add([]byte(`{"shard":{"index":-1,"count":4096}}`))
	f.Add([]byte(`{"peers":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if s, err := wire.DecodeShardPeersRequest(body); err == nil {
			if s.Valid() != nil || s.Whole() {
				t.Fatalf("request for %v accepted", s)
			}
		}
		infos, err := wire.DecodeShardPeersReply(json.RawMessage(body))
		if err != nil {
			return
		}
		if len(infos) > wire.MaxShardPeers {
			t.Fatalf("%d peers accepted", len(infos))
		}
		for _, in := range infos {
			if len(in.Addrs) == 0 || len(in.Addrs) > wire.MaxShardPeerAddrs {
				t.Fatalf("peer %s accepted with %d addresses", in.ID, len(in.Addrs))
			}
			if err := in.ID.Validate(); err != nil {
				t.Fatalf("peer ID %q accepted: %v", in.ID, err)
			}
		}
	})
}

package reach

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// lockedBuffer is a log sink safe for the host's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// markedHost is a real loopback host of an e31d in shard s of network "t".
func markedHost(t *testing.T, s p2p.Shard, log *slog.Logger) (host.Host, *ShardMates) {
	t.Helper()
	h := oldHost(t, "e31d/test")
	m := &ShardMates{Host: h, Network: "t", Shard: s, ConnectTimeout: 5 * time.Second, Log: log, InShard: func() int { return 0 }}
	m.Mark()
	return h, m
}

func connect(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// A node answers for a shard with the peers it is connected to that mark
// that shard, and says of a peer that splits the network another number of
// ways that it is in no market of its own.
func TestShardMates(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	quiet := slog.New(slog.DiscardHandler)
	a, ma := markedHost(t, p2p.Shard{Index: 0, Count: 2}, log)
	b, _ := markedHost(t, p2p.Shard{Index: 1, Count: 2}, quiet)
	c, _ := markedHost(t, p2p.Shard{Index: 0, Count: 2}, quiet)
	e, _ := markedHost(t, p2p.Shard{Index: 1, Count: 4}, quiet)
	old := oldHost(t, "e31d/0.4.0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); ma.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, h := range []host.Host{b, c, e, old} {
		connect(t, a, h)
	}
	marked := func(h host.Host, s p2p.Shard) bool {
		in, err := a.Peerstore().SupportsProtocols(h.ID(), p2p.ShardMarker("t", s))
		return err == nil && len(in) == 1
	}
	poll.Until(t, "identify", 10*time.Second, func() bool {
		return marked(b, p2p.Shard{Index: 1, Count: 2}) && marked(c, p2p.Shard{Index: 0, Count: 2})
	})

	ask := func(from peer.ID, s p2p.Shard) []peer.AddrInfo {
		t.Helper()
		raw, err := json.Marshal(wire.ShardPeersRequest{Shard: s})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := ma.Answer(ctx, from, raw)
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := wire.DecodeShardPeersReply(out)
		if err != nil {
			t.Fatal(err)
		}
		return infos
	}
	if got := ask(c.ID(), p2p.Shard{Index: 1, Count: 2}); len(got) != 1 || got[0].ID != b.ID() || len(got[0].Addrs) == 0 {
		t.Errorf("peers in shard 1/2: %v, want b alone", got)
	}
	if got := ask(c.ID(), p2p.Shard{Index: 0, Count: 2}); len(got) != 0 {
		t.Errorf("peers in shard 0/2 for c, the only other one: %v, want none (the asker is left out)", got)
	}
	if _, err := ma.Answer(ctx, c.ID(), json.RawMessage(`{"shard":{"index":0,"count":1}}`)); err == nil {
		t.Errorf("a request for the whole network was answered")
	}

	poll.Until(t, "the warning about e", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "peer="+e.ID().String())
	})
	for _, h := range []host.Host{b, c} {
		if strings.Contains(logs.String(), "peer="+h.ID().String()) {
			t.Errorf("a peer with the same shard count was warned about:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "another number of shards") {
		t.Errorf("the warning does not say why:\n%s", logs.String())
	}
	// An e31d from before shards marks none: it is named with the version
	// it says it runs.
	poll.Until(t, "the warning about the old node", 10*time.Second, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "peer="+old.ID().String()) {
				return strings.Contains(line, "version=e31d/0.4.0") && strings.Contains(line, "older version")
			}
		}
		return false
	})
}

// oldHost is a real loopback host of an e31d that marks no shard, as
// those from before shards do, saying it runs version.
func oldHost(t *testing.T, version string) host.Host {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: sk, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestMismatch(t *testing.T) {
	two := p2p.Shard{Index: 1, Count: 2}
	for _, tc := range []struct {
		name   string
		protos []protocol.ID
		want   string // a part of why; "" when the peer can be in the market
	}{
		{"same", []protocol.ID{"/ipfs/id/1.0.0", p2p.ShardMarker("e31", p2p.Shard{Count: 2})}, ""},
		{"other shard count", []protocol.ID{p2p.ShardMarker("e31", p2p.Shard{Index: 3, Count: 4})}, "--shards 4; this node: --shards 2"},
		{"other network", []protocol.ID{p2p.ShardMarker("testnet", p2p.Shard{Count: 1})}, `on network "testnet" (this node: "e31"`},
		{"this network wins", []protocol.ID{p2p.ShardMarker("testnet", p2p.Shard{Count: 1}), p2p.ShardMarker("e31", two)}, ""},
		{"no marker", []protocol.ID{"/ipfs/id/1.0.0"}, "older version"},
	} {
		why, _ := Mismatch("e31", two, tc.protos)
		if tc.want == "" && why != "" || !strings.Contains(why, tc.want) {
			t.Errorf("%s: Mismatch = %q, want %q", tc.name, why, tc.want)
		}
	}
}

// In a market split by class, a peer of another class or subshard is in
// the network's market; a peer that splits it another way is not.
func TestMismatchClasses(t *testing.T) {
	h100 := p2p.Shard{Class: "H100x8", Index: 1, Count: 4}
	for _, tc := range []struct {
		name  string
		shard p2p.Shard
		peer  p2p.Shard
		want  string
	}{
		{"another subshard", h100, p2p.Shard{Class: "H100x8", Index: 2, Count: 4}, ""},
		{"another class, split otherwise", h100, p2p.Shard{Class: "cpu", Count: 1}, ""},
		{"a peer of hash shards", h100, p2p.Shard{Index: 1, Count: 4}, "this node: by class"},
		{"a peer of classes", p2p.Shard{Count: 1}, p2p.Shard{Class: "cpu", Count: 1}, "by class (--market classes) (this node: by --shards"},
	} {
		why, _ := Mismatch("e31", tc.shard, []protocol.ID{p2p.ShardMarker("e31", tc.peer)})
		if tc.want == "" && why != "" || !strings.Contains(why, tc.want) {
			t.Errorf("%s: Mismatch = %q, want %q", tc.name, why, tc.want)
		}
	}
}

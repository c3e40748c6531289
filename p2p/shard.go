package p2p

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// MaxShards is the most shards a network may be split into.
const MaxShards = 4096

// Shard is the part of a network's market a peer takes part in. A network
// split Count ways has Count markets, each with its own two topics: a
// provider offers in its shard, a submitter's jobs are declared in its
// shard and run on that shard's providers, and a peer hears only its
// shard's offers, declarations, leases and releases. What one peer pays in
// bytes, CPU and memory is then that of a network Count times smaller.
// Direct streams (proposals, receipts, output) and content are not
// sharded. The zero value, like Count 1, is the whole network on the
// unsharded topics.
//
// A shard may be of a resource class (Class, market.Class's name): the
// class's market, or one subshard of it when Count > 1. A class shard
// holds only the providers whose boxes are of its class, and the jobs
// declared in it.
type Shard struct {
	Class string `json:"class,omitempty"`
	Index int    `json:"index"`
	Count int    `json:"count"`
}

// Whole reports whether s is the whole network, not a part of it.
func (s Shard) Whole() bool { return s.Count <= 1 && s.Class == "" }

// MaxClassLen bounds a shard's class name.
const MaxClassLen = 32

// validClass reports whether c can name a class shard's topics: 1 to
// MaxClassLen letters, digits, '-' and '+'.
func validClass(c string) bool {
	if c == "" || len(c) > MaxClassLen {
		return false
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '+') {
			return false
		}
	}
	return true
}

// Valid reports what is wrong with s, if anything.
func (s Shard) Valid() error {
	switch {
	case s.Class != "" && !validClass(s.Class):
		return fmt.Errorf("shard class %q: want 1 to %d letters, digits, '-' or '+'", s.Class, MaxClassLen)
	case s.Count < 0 || s.Count > MaxShards:
		return fmt.Errorf("shard count %d is outside 1..%d", s.Count, MaxShards)
	case s.Count&(s.Count-1) != 0:
		return fmt.Errorf("shard count %d is not a power of two", s.Count)
	case s.Index < 0 || s.Index >= max(s.Count, 1):
		return fmt.Errorf("shard %d is outside 0..%d", s.Index, max(s.Count, 1)-1)
	}
	return nil
}

// String is "INDEX/COUNT", as ParseShard reads it, after "CLASS:" for a
// class shard.
func (s Shard) String() string {
	if s.Class != "" {
		return fmt.Sprintf("%s:%d/%d", s.Class, s.Index, max(s.Count, 1))
	}
	return fmt.Sprintf("%d/%d", s.Index, max(s.Count, 1))
}

// ParseShard reads "INDEX/COUNT".
func ParseShard(v string) (Shard, error) {
	i, c, ok := strings.Cut(v, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want INDEX/COUNT, e.g. 3/64", v)
	}
	index, err := strconv.Atoi(i)
	if err != nil {
		return Shard{}, fmt.Errorf("shard %q: index: %w", v, err)
	}
	count, err := strconv.Atoi(c)
	if err != nil {
		return Shard{}, fmt.Errorf("shard %q: count: %w", v, err)
	}
	s := Shard{Index: index, Count: count}
	if err := s.Valid(); err != nil {
		return Shard{}, fmt.Errorf("shard %q: %w", v, err)
	}
	return s, nil
}

// ShardOf is the shard of count that a peer takes part in unless told
// otherwise: the first bytes of SHA-256 of its ID, modulo count. Peer IDs
// are keys, so peers fall evenly into the shards.
func ShardOf(id peer.ID, count int) Shard {
	if count <= 1 {
		return Shard{Count: 1}
	}
	sum := sha256.Sum256([]byte(id))
	return Shard{Index: int(binary.BigEndian.Uint64(sum[:8]) % uint64(count)), Count: count}
}

// Scope is the name under which s's topics live on network: the network
// itself when s is the whole network, "NETWORK/shard-INDEX-of-COUNT"
// for a hash shard, "NETWORK/class-CLASS" for a class's market and
// "NETWORK/class-CLASS/shard-INDEX-of-COUNT" for a subshard of a class.
// TopicName(s.Scope(network), short) is a topic of the shard.
func (s Shard) Scope(network string) string {
	if s.Whole() {
		return network
	}
	base := network
	if s.Class != "" {
		base = network + "/class-" + s.Class
		if s.Count <= 1 {
			return base
		}
	}
	return fmt.Sprintf("%s/shard-%d-of-%d", base, s.Index, s.Count)
}

// ClassShardOf is the subshard of class, split count ways, that a peer
// of the class takes part in: as ShardOf, within the class.
func ClassShardOf(id peer.ID, class string, count int) Shard {
	s := ShardOf(id, count)
	s.Class = class
	return s
}

// ShardMarker is the protocol a peer of a sharded network registers to say
// which shard it takes part in: identify carries its protocols to every
// peer it connects to, so that any peer can tell, of those it is connected
// to, which are in a given shard. Nothing is ever sent on it.
func ShardMarker(network string, s Shard) protocol.ID {
	return protocol.ID("/e31/" + s.Scope(network) + "/member/1")
}

// ShardProviders is how many providers a shard is sized for:
// SuggestShards keeps every shard at or below it. At this size one peer
// hears about 26 offers a second (a heartbeat every 10 s) and a shard of
// 2,000 GPUs or more, and pays a few hundred KB/s at most
// (docs/figures.md, "One peer in a large network").
const ShardProviders = 256

// SuggestShards is the shard count for a network of about providers
// providers: the smallest power of two that keeps each shard at or below
// ShardProviders.
func SuggestShards(providers int) int {
	n := 1
	for n < MaxShards && (providers+n-1)/n > ShardProviders {
		n *= 2
	}
	return n
}

// ParseShardMarker reads the shard of a ShardMarker of network; ok is
// false for any other protocol.
func ParseShardMarker(network string, proto protocol.ID) (s Shard, ok bool) {
	const suffix = "/member/1"
	rest, found := strings.CutPrefix(string(proto), "/e31/"+network+"/")
	if !found {
		return Shard{}, false
	}
	scope, found := strings.CutSuffix("/"+rest, suffix)
	switch {
	case !found:
		return Shard{}, false
	case scope == "":
		return Shard{Count: 1}, true
	}
	if rest, ok := strings.CutPrefix(scope, "/class-"); ok {
		class, sub, _ := strings.Cut(rest, "/")
		s.Class, s.Count = class, 1
		scope = ""
		if sub != "" {
			scope = "/" + sub
		}
	}
	if scope != "" {
		var i, n int
		if _, err := fmt.Sscanf(scope, "/shard-%d-of-%d", &i, &n); err != nil {
			return Shard{}, false
		}
		s.Index, s.Count = i, n
	}
	if s.Valid() != nil || s.Whole() || ShardMarker(network, s) != proto {
		return Shard{}, false
	}
	return s, true
}

// ParseAnyShardMarker reads a ShardMarker of any network: the network it
// names and the shard. A peer of another network marks its own network's
// name, so ParseShardMarker with this node's name would not know it for a
// marker at all. ok is false for a protocol that is no ShardMarker.
func ParseAnyShardMarker(proto protocol.ID) (network string, s Shard, ok bool) {
	rest, found := strings.CutPrefix(string(proto), "/e31/")
	if !found {
		return "", Shard{}, false
	}
	scope, found := strings.CutSuffix(rest, "/member/1")
	if !found || scope == "" {
		return "", Shard{}, false
	}
	if i := strings.LastIndex(scope, "/class-"); i > 0 {
		if s, ok := ParseShardMarker(scope[:i], proto); ok {
			return scope[:i], s, true
		}
	}
	if i := strings.LastIndex(scope, "/shard-"); i > 0 {
		if s, ok := ParseShardMarker(scope[:i], proto); ok {
			return scope[:i], s, true
		}
	}
	if s, ok := ParseShardMarker(scope, proto); ok && s.Whole() {
		return scope, s, true
	}
	return "", Shard{}, false
}

package wire

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/p2p/peertext"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// KindDigest is the message kind of a shard's digest on the network-wide
// digest topic (p2p.TopicDigest).
const KindDigest = "digest"

// DigestBody is one shard's market in a few hundred bytes, as one of its
// members saw it (market.Digest, with the shard it describes): every peer
// of the network hears every shard's, and so knows the whole market's
// shape without hearing any shard's offers. Members name a few of the
// shard's peers, so that a peer outside it can reach the shard.
type DigestBody struct {
	Shard      p2p.Shard `json:"shard"`
	Providers  int       `json:"providers"`
	FreeBoxes  []int     `json:"free_boxes"`
	Queued     int       `json:"queued"`
	QueuedGPUs int       `json:"queued_gpus"`
	// OldestWaitMs is how long the shard's oldest queued job has waited.
	OldestWaitMs int64             `json:"oldest_wait_ms"`
	Held         []market.HeldRoot `json:"held,omitempty"`
	// ViewHash is the hash of the view of the publisher's last epoch's
	// Match (hex SHA-256), "" before its first.
	ViewHash string         `json:"view_hash,omitempty"`
	Members  []DigestMember `json:"members,omitempty"`
}

// DigestMember is a peer of the digest's shard and where it listens.
type DigestMember struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

// Bounds of a digest, so that one peer cannot bloat every peer's table of
// the market: a digest stays under 4 KiB.
const (
	MaxDigestMembers     = 4
	MaxDigestMemberAddrs = 4
	// MaxDigestCount bounds the providers, boxes, jobs and GPUs a digest
	// counts: far past any shard's size (p2p.ShardProviders).
	MaxDigestCount = 1 << 24
	// MaxDigestWaitMs bounds the oldest wait a digest reports: a year.
	MaxDigestWaitMs = int64(365 * 24 * time.Hour / time.Millisecond)
)

// DigestShard is the shard of s's kind that id is a member of: its hash
// shard (p2p.ShardOf) or, for a class shard, its subshard of the class
// (p2p.ClassShardOf). A peer may publish a digest only of its own shard.
func DigestShard(id peer.ID, s p2p.Shard) p2p.Shard {
	if s.Class != "" {
		return p2p.ClassShardOf(id, s.Class, max(s.Count, 1))
	}
	return p2p.ShardOf(id, max(s.Count, 1))
}

// ValidateDigest is the body validator of the digest topic: a digest,
// within its bounds, of a shard its signer is a member of. Whether the
// shard's digests come too often is the receiving node's to judge.
func ValidateDigest(s p2p.Signed) error {
	if s.Message.Kind != KindDigest {
		return fmt.Errorf("digest topic carries digests, not %q", s.Message.Kind)
	}
	var b DigestBody
	if err := s.Decode(&b); err != nil {
		return err
	}
	return b.Check(s.Signer)
}

// DecodeDigest is the body of a digest that ValidateDigest accepted.
func DecodeDigest(s p2p.Signed) (DigestBody, error) {
	var b DigestBody
	if err := s.Decode(&b); err != nil {
		return DigestBody{}, err
	}
	return b, nil
}

// Check is what a digest must be to be believed: of a valid shard (a
// class shard's class as market.ParseClass reads it) that signer is a
// member of, every count within bounds and consistent (no more boxes with
// free GPUs than providers, no more holders than providers), held roots
// CIDs listed once, and members of the shard at addresses that parse.
func (b DigestBody) Check(signer peer.ID) error {
	if err := b.checkShard(); err != nil {
		return err
	}
	if DigestShard(signer, b.Shard) != b.Shard {
		return fmt.Errorf("%w: digest of shard %s signed by %s, a member of %s", p2p.ErrForged, b.Shard, signer, DigestShard(signer, b.Shard))
	}
	if err := b.checkCounts(); err != nil {
		return err
	}
	if err := b.checkHeld(); err != nil {
		return err
	}
	if b.ViewHash != "" {
		if h, err := hex.DecodeString(b.ViewHash); err != nil || len(h) != 32 {
			return fmt.Errorf("digest view hash %q: want 64 hex digits", b.ViewHash)
		}
	}
	return b.checkMembers()
}

func (b DigestBody) checkShard() error {
	if err := b.Shard.Valid(); err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if b.Shard.Count < 1 {
		return fmt.Errorf("digest shard count %d: want 1 or more", b.Shard.Count)
	}
	if b.Shard.Class != "" {
		if _, err := market.ParseClass(b.Shard.Class); err != nil {
			return fmt.Errorf("digest shard class %q: %w", b.Shard.Class, err)
		}
	}
	return nil
}

func (b DigestBody) checkCounts() error {
	for _, c := range []struct {
		name string
		n    int
	}{{"providers", b.Providers}, {"queued", b.Queued}, {"queued_gpus", b.QueuedGPUs}} {
		if c.n < 0 || c.n > MaxDigestCount {
			return fmt.Errorf("digest %s %d: outside 0..%d", c.name, c.n, MaxDigestCount)
		}
	}
	if b.OldestWaitMs < 0 || b.OldestWaitMs > MaxDigestWaitMs {
		return fmt.Errorf("digest oldest wait %dms: outside 0..%d", b.OldestWaitMs, MaxDigestWaitMs)
	}
	if len(b.FreeBoxes) > market.MaxDigestBuckets {
		return fmt.Errorf("digest free_boxes has %d buckets, at most %d", len(b.FreeBoxes), market.MaxDigestBuckets)
	}
	boxes := 0
	for k, n := range b.FreeBoxes {
		if n < 0 || n > MaxDigestCount {
			return fmt.Errorf("digest free_boxes[%d] %d: outside 0..%d", k, n, MaxDigestCount)
		}
		boxes += n
	}
	if boxes > b.Providers {
		return fmt.Errorf("digest counts %d boxes in free_boxes but %d providers", boxes, b.Providers)
	}
	return nil
}

func (b DigestBody) checkHeld() error {
	if len(b.Held) > market.MaxDigestHeld {
		return fmt.Errorf("digest lists %d held roots, at most %d", len(b.Held), market.MaxDigestHeld)
	}
	seen := make(map[string]bool, len(b.Held))
	for i, h := range b.Held {
		if len(h.Root) > MaxStringLen {
			return fmt.Errorf("digest held[%d]: root too long", i)
		}
		if _, err := cid.Decode(h.Root); err != nil {
			return fmt.Errorf("digest held[%d] root %q: %w", i, h.Root, err)
		}
		if seen[h.Root] {
			return fmt.Errorf("digest held[%d]: root %s listed twice", i, h.Root)
		}
		seen[h.Root] = true
		if h.Holders < 1 || h.Holders > b.Providers {
			return fmt.Errorf("digest held[%d]: %d holders of %d providers", i, h.Holders, b.Providers)
		}
	}
	return nil
}

func (b DigestBody) checkMembers() error {
	if len(b.Members) > MaxDigestMembers {
		return fmt.Errorf("digest lists %d members, at most %d", len(b.Members), MaxDigestMembers)
	}
	for i, m := range b.Members {
		id, err := peer.Decode(m.ID)
		if err != nil {
			return fmt.Errorf("digest members[%d] %q: %w", i, m.ID, err)
		}
		if id.String() != m.ID {
			return fmt.Errorf("digest members[%d] %q: not a peer ID's canonical form", i, m.ID)
		}
		if DigestShard(id, b.Shard) != b.Shard {
			return fmt.Errorf("digest members[%d] %s is not of shard %s", i, id, b.Shard)
		}
		if len(m.Addrs) > MaxDigestMemberAddrs {
			return fmt.Errorf("digest members[%d] has %d addresses, at most %d", i, len(m.Addrs), MaxDigestMemberAddrs)
		}
		for j, a := range m.Addrs {
			if len(a) > MaxStringLen {
				return fmt.Errorf("digest members[%d].addrs[%d]: too long", i, j)
			}
			if err := peertext.Check(a); err != nil {
				return fmt.Errorf("digest members[%d].addrs[%d]: %w", i, j, err)
			}
			if _, err := ma.NewMultiaddr(a); err != nil {
				return fmt.Errorf("digest members[%d].addrs[%d] %q: %w", i, j, a, err)
			}
		}
	}
	return nil
}

// Digest is the body as the market reads it (market.Route).
func (b DigestBody) Digest() market.Digest {
	return market.Digest{
		Class: market.Class(b.Shard.Class), Index: b.Shard.Index, Count: b.Shard.Count,
		Providers: b.Providers, FreeBoxes: b.FreeBoxes, Queued: b.Queued, QueuedGPUs: b.QueuedGPUs,
		OldestWait: market.Duration(b.OldestWaitMs), Held: b.Held,
	}
}

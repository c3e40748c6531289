package flood

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Each kind is what it claims to be to the validators the daemons run:
// Sybil declarations pass them all, from a new identity every time; the
// invalid and oversized ones are refused, with a reason that penalises
// the sender.
func TestMessagesMeetTheValidators(t *testing.T) {
	p, err := New(context.Background(), Config{Network: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Now()
	validators := map[string]func(p2p.Signed) error{p2p.TopicJobs: wire.ValidateJobMessage, p2p.TopicOffers: wire.ValidateOffer}

	signers := make(map[peer.ID]bool)
	for i := range 3 {
		topic, data, author, err := p.message(Sybil, i, now)
		if err != nil {
			t.Fatal(err)
		}
		s, err := p2p.Open(data)
		if err != nil {
			t.Fatalf("sybil %d: %v", i, err)
		}
		want, _ := peer.IDFromPrivateKey(author)
		if s.Signer != want || s.Signer == p.ID() || signers[s.Signer] {
			t.Fatalf("sybil %d signed by %s, author %s, flooder %s", i, s.Signer, want, p.ID())
		}
		signers[s.Signer] = true
		if err := validators[topic](s); err != nil {
			t.Fatalf("sybil %d refused: %v", i, err)
		}
	}

	for i := range 3 {
		topic, data, author, err := p.message(Invalid, i, now)
		if err != nil {
			t.Fatal(err)
		}
		if author != nil {
			t.Fatalf("invalid %d published under another key", i)
		}
		s, err := p2p.Open(data)
		if err == nil {
			err = validators[topic](s)
		}
		if err == nil || errors.Is(err, p2p.ErrStale) || errors.Is(err, p2p.ErrReplayed) {
			t.Fatalf("invalid %d: got %v, want a rejection", i, err)
		}
	}

	_, data, _, err := p.message(Oversized, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.Open(data); !errors.Is(err, p2p.ErrOversized) || len(data) >= 1<<20 {
		t.Fatalf("oversized (%d bytes): %v", len(data), err)
	}
}

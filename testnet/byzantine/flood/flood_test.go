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

// A hoard's messages are valid requeues, each signed by the identity
// whose declarations it carries, within the gossip's size limit; one
// round declares every identity's jobs and tasks, some of the largest
// size a requeue carries.
func TestHoardMessagesAreValid(t *testing.T) {
	p, err := New(context.Background(), Config{Network: "test", Label: "hoard"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := HoardConfig{Identities: 3, Singles: 300, Big: 2, Tasks: 25_000}.withDefaults()
	pad, err := bigPadding(p.label)
	if err != nil {
		t.Fatal(err)
	}
	out := Hoarded{Identities: c.Identities}
	var hs []hoarder
	for k := range c.Identities {
		h, err := p.hoarder(c, k, pad, &out)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if out.Singles != 900 || out.Big != 6 || out.Tasks != 75_000 || out.Arrays != 9 {
		t.Fatalf("hoarded %+v", out)
	}
	signers := map[peer.ID]bool{}
	jobs, big := 0, 0
	for _, h := range hs {
		for _, b := range h.batches {
			s, err := p2p.Seal(h.key, wire.KindRequeue, wire.RequeueBody{Declarations: b}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got, err := p2p.Open(s.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := wire.ValidateJobMessage(got); err != nil {
				t.Fatalf("a hoard's requeue refused: %v", err)
			}
			signers[got.Signer] = true
			for _, raw := range b {
				d, err := p2p.Open(raw)
				if err != nil {
					t.Fatal(err)
				}
				var body wire.DeclarationBody
				if err := d.Decode(&body); err != nil {
					t.Fatal(err)
				}
				jobs += body.Declaration.Parts()
				if len(raw) > wire.MaxDeclarationEnvelope/2 {
					big++
				}
			}
		}
	}
	if len(signers) != 3 || jobs != 900+75_000 || big != 6 {
		t.Fatalf("%d signers, %d jobs, %d large declarations", len(signers), jobs, big)
	}
}

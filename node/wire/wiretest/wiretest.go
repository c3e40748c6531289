// Package wiretest makes identities and well-formed messages for tests of
// the code that speaks the wire protocol. Identities can be seeded, so that
// fuzz corpus files naming them stay valid from run to run.
package wiretest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Party is a peer identity for tests.
type Party struct {
	SK crypto.PrivKey
	ID peer.ID
}

// SeededParty derives an Ed25519 identity from seed, so that corpus files
// which name its peer ID or carry its signatures stay valid from run to run.
func SeededParty(tb testing.TB, seed byte) Party {
	tb.Helper()
	return newParty(tb, bytes.NewReader(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
}

// FreshParty is a new random identity.
func FreshParty(tb testing.TB) Party {
	tb.Helper()
	return newParty(tb, rand.Reader)
}

func newParty(tb testing.TB, src io.Reader) Party {
	tb.Helper()
	sk, _, err := crypto.GenerateEd25519Key(src)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		tb.Fatal(err)
	}
	return Party{SK: sk, ID: id}
}

// CID is the CIDv1 of raw data, as content/ would name an imported file.
func CID(tb testing.TB, data string) string {
	tb.Helper()
	const sha2_256 = 0x12 // multihash code
	c, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: sha2_256, MhLength: -1}.Sum([]byte(data))
	if err != nil {
		tb.Fatal(err)
	}
	return c.String()
}

// Time is a fixed signing time, so that seeds do not change between runs.
var Time = time.UnixMilli(1767225600000) // 2026-01-01T00:00:00Z

func Terms(provider, submitter peer.ID) wire.LeaseTerms {
	proposed := Time.UnixMilli()
	return wire.LeaseTerms{
		ID:          wire.LeaseID("q3v7kz2mxa4bnc6dpe8f", provider.String(), proposed, 7),
		Job:         "q3v7kz2mxa4bnc6dpe8f",
		Provider:    provider.String(),
		Submitter:   submitter.String(),
		GPUs:        []string{"GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c01", "GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c02"},
		CPUs:        16,
		MemoryBytes: 64 << 30,
		Limit:       8 * market.Hour,
		Proposed:    proposed,
		Expires:     proposed + 30_000,
		Epoch:       4211,
		ViewHash:    "9c1f0e4b7a2d6e3f",
		Rank:        0,
	}
}

// SignedLease is a lease signed by prov and countersigned by sub.
func SignedLease(tb testing.TB, prov, sub Party) wire.SignedLease {
	tb.Helper()
	l := wire.SignedLease{Terms: Terms(prov.ID, sub.ID)}
	if err := l.SignProvider(prov.SK); err != nil {
		tb.Fatal(err)
	}
	if err := l.Countersign(sub.SK); err != nil {
		tb.Fatal(err)
	}
	return l
}

func Declaration(tb testing.TB, sources ...string) wire.DeclarationBody {
	tb.Helper()
	var inputs []market.Input
	for i, s := range sources {
		inputs = append(inputs, market.Input{Source: s, Mount: "/data/" + string(rune('a'+i))})
	}
	d := market.NewDeclaration("train", []string{"python", "train.py", "--epochs", "3"}, 2, 8*market.Hour, inputs)
	d.Work.Env = map[string]string{"SEED": "1"}
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: market.DefaultMaxResumes}
	if err := d.Validate(); err != nil {
		tb.Fatal(err)
	}
	return wire.DeclarationBody{Declaration: d, Addrs: []string{"/ip4/10.0.0.7/tcp/4001", "/ip4/10.0.0.7/udp/4001/quic-v1"}}
}

func Offer(provider peer.ID) wire.OfferBody {
	return wire.OfferBody{
		Offer: market.Offer{
			Provider: provider.String(),
			GPUs: []market.GPU{
				{Index: 0, UUID: "GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c01", Model: "NVIDIA H200", MemoryBytes: 141 << 30, Free: true},
				{Index: 1, UUID: "GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c02", Model: "NVIDIA H200", MemoryBytes: 141 << 30},
			},
			CPUs:        32,
			MemoryBytes: 256 << 30,
		},
		Addrs:       []string{"/ip4/10.0.0.9/tcp/4001"},
		HeartbeatMs: 5000,
	}
}

func Release(prov, sub peer.ID) wire.ReleaseBody {
	t := Terms(prov, sub)
	return wire.ReleaseBody{
		Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: "succeeded", Attribution: "none", HeldMs: 3_600_000, At: t.Proposed + 3_600_000,
	}
}

// OnWire seals body as signer and opens it again, as a receiving peer would.
func OnWire(tb testing.TB, signer Party, kind string, body any) p2p.Signed {
	tb.Helper()
	s, err := p2p.Seal(signer.SK, kind, body, Time)
	if err != nil {
		tb.Fatal(err)
	}
	got, err := p2p.Open(s.Raw)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

package node

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// party is a peer identity for tests.
type party struct {
	sk crypto.PrivKey
	id peer.ID
}

// seededParty derives an Ed25519 identity from seed, so that corpus files
// which name its peer ID or carry its signatures stay valid from run to run.
func seededParty(tb testing.TB, seed byte) party {
	tb.Helper()
	return newParty(tb, bytes.NewReader(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
}

// freshParty is a new random identity.
func freshParty(tb testing.TB) party {
	tb.Helper()
	return newParty(tb, rand.Reader)
}

func newParty(tb testing.TB, src io.Reader) party {
	tb.Helper()
	sk, _, err := crypto.GenerateEd25519Key(src)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		tb.Fatal(err)
	}
	return party{sk: sk, id: id}
}

// testCID is the CIDv1 of raw data, as content/ would name an imported file.
func testCID(tb testing.TB, data string) string {
	tb.Helper()
	const sha2_256 = 0x12 // multihash code
	c, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: sha2_256, MhLength: -1}.Sum([]byte(data))
	if err != nil {
		tb.Fatal(err)
	}
	return c.String()
}

// testTime is a fixed signing time, so that seeds do not change between runs.
var testTime = time.UnixMilli(1767225600000) // 2026-01-01T00:00:00Z

func testTerms(provider, submitter peer.ID) LeaseTerms {
	proposed := testTime.UnixMilli()
	return LeaseTerms{
		ID:          leaseID("q3v7kz2mxa4bnc6dpe8f", provider.String(), proposed, 7),
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

// signedLease is a lease signed by prov and countersigned by sub.
func signedLease(tb testing.TB, prov, sub party) SignedLease {
	tb.Helper()
	l := SignedLease{Terms: testTerms(prov.id, sub.id)}
	if err := l.signProvider(prov.sk); err != nil {
		tb.Fatal(err)
	}
	if err := l.countersign(sub.sk); err != nil {
		tb.Fatal(err)
	}
	return l
}

func testDeclaration(tb testing.TB, sources ...string) declarationBody {
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
	return declarationBody{Declaration: d, Addrs: []string{"/ip4/10.0.0.7/tcp/4001", "/ip4/10.0.0.7/udp/4001/quic-v1"}}
}

func testOffer(provider peer.ID) offerBody {
	return offerBody{
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

func testRelease(prov, sub peer.ID) releaseBody {
	t := testTerms(prov, sub)
	return releaseBody{
		Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: "succeeded", Attribution: "none", HeldMs: 3_600_000, At: t.Proposed + 3_600_000,
	}
}

// onWire seals body as signer and opens it again, as a receiving peer would.
func onWire(tb testing.TB, signer party, kind string, body any) p2p.Signed {
	tb.Helper()
	s, err := p2p.Seal(signer.sk, kind, body, testTime)
	if err != nil {
		tb.Fatal(err)
	}
	got, err := p2p.Open(s.Raw)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

func TestWireLease(t *testing.T) {
	prov, sub, other := freshParty(t), freshParty(t), freshParty(t)
	good := signedLease(t, prov, sub)

	badProviderSig := good
	if err := badProviderSig.signProvider(other.sk); err != nil {
		t.Fatal(err)
	}
	badSubmitterSig := good
	if err := badSubmitterSig.countersign(other.sk); err != nil {
		t.Fatal(err)
	}
	unsigned := good
	unsigned.SubmitterSig = nil
	// Terms changed after both signed: the signatures no longer cover them.
	moreGPUs := good
	moreGPUs.Terms.GPUs = append(moreGPUs.Terms.GPUs, "GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c03")
	// A lease in the provider's name, complete with its own key's signature,
	// announced by someone else.
	stolen := signedLease(t, other, sub)
	stolen.Terms.Provider = prov.id.String()

	for _, tc := range []struct {
		name   string
		signer party
		lease  SignedLease
		forged bool
	}{
		{"both signatures", prov, good, false},
		{"provider signature by another key", prov, badProviderSig, true},
		{"submitter signature by another key", prov, badSubmitterSig, true},
		{"no submitter signature", prov, unsigned, true},
		{"terms changed after signing", prov, moreGPUs, true},
		{"announced by a third party", other, good, true},
		{"provider named but not signed", other, stolen, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateJobMessage(onWire(t, tc.signer, kindLease, tc.lease))
			if !tc.forged {
				if err != nil {
					t.Fatalf("valid lease rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, p2p.ErrForged) {
				t.Fatalf("got %v, want an error wrapping p2p.ErrForged", err)
			}
		})
	}
}

func TestWireRelease(t *testing.T) {
	prov, sub, other := freshParty(t), freshParty(t), freshParty(t)
	body := testRelease(prov.id, sub.id)
	for _, signer := range []party{prov, sub} {
		if err := validateJobMessage(onWire(t, signer, kindRelease, body)); err != nil {
			t.Errorf("release signed by a party to the lease rejected: %v", err)
		}
	}
	err := validateJobMessage(onWire(t, other, kindRelease, body))
	if !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("release signed by a third party: got %v, want an error wrapping p2p.ErrForged", err)
	}
}

func TestWireDeclaration(t *testing.T) {
	sub := freshParty(t)
	good := testDeclaration(t, testCID(t, "shard-0"), testCID(t, "shard-1"))
	if err := validateJobMessage(onWire(t, sub, kindDeclaration, good)); err != nil {
		t.Fatalf("declaration naming inputs by CID rejected: %v", err)
	}

	// A local path is valid in a declaration handed to the local API, which
	// imports it; on the wire it names a file no other peer can read.
	local := testDeclaration(t, testCID(t, "shard-0"), "/home/alice/data/shard-1")
	if err := local.Declaration.Validate(); err != nil {
		t.Fatalf("the declaration itself should be valid: %v", err)
	}
	err := validateJobMessage(onWire(t, sub, kindDeclaration, local))
	if err == nil {
		t.Fatal("declaration with a local path as data source accepted")
	}
	if !strings.Contains(err.Error(), "data[1].source") {
		t.Fatalf("rejection does not name the field: %v", err)
	}
}

func TestWireUnknownKind(t *testing.T) {
	sub := freshParty(t)
	if err := validateJobMessage(onWire(t, sub, kindOffer, testOffer(sub.id))); err == nil {
		t.Fatal("an offer was accepted on the jobs topic")
	}
}

func TestWireOffer(t *testing.T) {
	prov, other := freshParty(t), freshParty(t)
	if err := validateOffer(onWire(t, prov, kindOffer, testOffer(prov.id))); err != nil {
		t.Fatalf("valid offer rejected: %v", err)
	}
	// A peer advertising another's GPUs would draw leases to a provider that
	// never offered them.
	err := validateOffer(onWire(t, other, kindOffer, testOffer(prov.id)))
	if !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("offer naming another provider: got %v, want an error wrapping p2p.ErrForged", err)
	}
}

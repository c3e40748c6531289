package wire_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"

	"github.com/e31network/e31/p2p"
)

func TestWireLease(t *testing.T) {
	prov, sub, other := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	good := wiretest.SignedLease(t, prov, sub)

	badProviderSig := good
	if err := badProviderSig.SignProvider(other.SK); err != nil {
		t.Fatal(err)
	}
	badSubmitterSig := good
	if err := badSubmitterSig.Countersign(other.SK); err != nil {
		t.Fatal(err)
	}
	unsigned := good
	unsigned.SubmitterSig = nil
	// Terms changed after both signed: the signatures no longer cover them.
	moreGPUs := good
	moreGPUs.Terms.GPUs = append(moreGPUs.Terms.GPUs, "GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c03")
	// A lease in the provider's name, complete with its own key's signature,
	// announced by someone else.
	stolen := wiretest.SignedLease(t, other, sub)
	stolen.Terms.Provider = prov.ID.String()

	for _, tc := range []struct {
		name   string
		signer wiretest.Party
		lease  wire.SignedLease
		forged bool
	}{
		{"both signatures", prov, good, false},
		{"provider signature by another key", prov, badProviderSig, true},
		{"submitter signature by another key", prov, badSubmitterSig, true},
		{"no submitter signature", prov, unsigned, true},
		{"terms changed after signing", prov, moreGPUs, true},
		{"announced by a third wiretest.Party", other, good, true},
		{"provider named but not signed", other, stolen, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wire.ValidateJobMessage(wiretest.OnWire(t, tc.signer, wire.KindLease, tc.lease))
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
	prov, sub, other := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	body := wiretest.Release(prov.ID, sub.ID)
	for _, signer := range []wiretest.Party{prov, sub} {
		if err := wire.ValidateJobMessage(wiretest.OnWire(t, signer, wire.KindRelease, body)); err != nil {
			t.Errorf("release signed by a wiretest.Party to the lease rejected: %v", err)
		}
	}
	err := wire.ValidateJobMessage(wiretest.OnWire(t, other, wire.KindRelease, body))
	if !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("release signed by a third wiretest.Party: got %v, want an error wrapping p2p.ErrForged", err)
	}
}

func TestWireDeclaration(t *testing.T) {
	sub := wiretest.FreshParty(t)
	good := wiretest.Declaration(t, wiretest.CID(t, "shard-0"), wiretest.CID(t, "shard-1"))
	if err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, good)); err != nil {
		t.Fatalf("declaration naming inputs by CID rejected: %v", err)
	}

	// A local path is valid in a declaration handed to the local API, which
	// imports it; on the wire it names a file no other peer can read.
	local := wiretest.Declaration(t, wiretest.CID(t, "shard-0"), "/home/alice/data/shard-1")
	if err := local.Declaration.Validate(); err != nil {
		t.Fatalf("the declaration itself should be valid: %v", err)
	}
	err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, local))
	if err == nil {
		t.Fatal("declaration with a local path as data source accepted")
	}
	if !strings.Contains(err.Error(), "data[1].source") {
		t.Fatalf("rejection does not name the field: %v", err)
	}
}

// An image, like an input, travels by CID: a path or a registry tag in a
// broadcast declaration names bytes no provider can be sure of.
func TestWireDeclarationImage(t *testing.T) {
	sub := wiretest.FreshParty(t)
	byCID := wiretest.Declaration(t, wiretest.CID(t, "shard-0"))
	byCID.Declaration.Work.Image = wiretest.CID(t, "image")
	if err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, byCID)); err != nil {
		t.Fatalf("declaration naming its image by CID rejected: %v", err)
	}
	for _, img := range []string{"oci-archive:/home/alice/img.tar", "oci:/home/alice/layout:v1", "docker://registry.example/trainer:v1"} {
		local := wiretest.Declaration(t, wiretest.CID(t, "shard-0"))
		local.Declaration.Work.Image = img
		if err := local.Declaration.Validate(); err != nil {
			t.Fatalf("%s: the declaration itself should be valid: %v", img, err)
		}
		err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, local))
		if err == nil {
			t.Fatalf("declaration with image %s accepted on the wire", img)
		}
		if !strings.Contains(err.Error(), "work.image") {
			t.Fatalf("%s: rejection does not name the field: %v", img, err)
		}
	}
}

func TestWireUnknownKind(t *testing.T) {
	sub := wiretest.FreshParty(t)
	if err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindOffer, wiretest.Offer(sub.ID))); err == nil {
		t.Fatal("an offer was accepted on the jobs topic")
	}
}

func TestWireOffer(t *testing.T) {
	prov, other := wiretest.FreshParty(t), wiretest.FreshParty(t)
	if err := wire.ValidateOffer(wiretest.OnWire(t, prov, wire.KindOffer, wiretest.Offer(prov.ID))); err != nil {
		t.Fatalf("valid offer rejected: %v", err)
	}
	// A peer advertising another's GPUs would draw leases to a provider that
	// never offered them.
	err := wire.ValidateOffer(wiretest.OnWire(t, other, wire.KindOffer, wiretest.Offer(prov.ID)))
	if !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("offer naming another provider: got %v, want an error wrapping p2p.ErrForged", err)
	}
}

// Every batch wire.RequeueBatches makes, sealed as a requeue, fits the gossip
// size limit, whatever the sizes of the declarations; and a declaration of
// the largest size submit accepts is still re-announced.
func TestRequeueBatchesFitTheLimit(t *testing.T) {
	sub := wiretest.FreshParty(t)
	sizes := []int{1 << 10, 1700, 8 << 10, 30 << 10, 0}
	for _, size := range sizes {
		var envs [][]byte
		for i := range 40 {
			d := wiretest.Declaration(t, wiretest.CID(t, fmt.Sprint("in", i)))
			d.Declaration.Work.Env["PAD"] = strings.Repeat("x", size)
			s, err := p2p.Seal(sub.SK, wire.KindDeclaration, d, wiretest.Time)
			if err != nil {
				t.Fatal(err)
			}
			envs = append(envs, s.Raw)
		}
		batches, tooLarge := wire.RequeueBatches(envs)
		if len(tooLarge) != 0 {
			t.Fatalf("pad %d: %d declarations left out", size, len(tooLarge))
		}
		n := 0
		for _, b := range batches {
			s, err := p2p.Seal(sub.SK, wire.KindRequeue, wire.RequeueBody{Declarations: b}, wiretest.Time)
			if err != nil {
				t.Fatalf("pad %d: a batch of %d does not seal: %v", size, len(b), err)
			}
			msg := wiretest.OnWire(t, sub, wire.KindRequeue, wire.RequeueBody{Declarations: b})
			checked, err := wire.CheckRequeue(msg)
			if err != nil || len(s.Raw) > p2p.MaxPayload {
				t.Fatalf("pad %d: batch refused: %v", size, err)
			}
			// Read again once accepted, without verifying, it holds the
			// same declarations.
			accepted, err := wire.AcceptedRequeue(msg)
			if err != nil || len(accepted) != len(checked) {
				t.Fatalf("pad %d: AcceptedRequeue read %d of %d: %v", size, len(accepted), len(checked), err)
			}
			for i := range checked {
				if wire.JobID(accepted[i]) != wire.JobID(checked[i]) || accepted[i].Signer != checked[i].Signer {
					t.Fatalf("pad %d: declaration %d reads differently", size, i)
				}
			}
			n += len(b)
		}
		if n != len(envs) {
			t.Fatalf("pad %d: %d of %d declarations batched", size, n, len(envs))
		}
	}

	// The largest declaration envelope submit lets through, alone.
	d := wiretest.Declaration(t)
	d.Declaration.Work.Env["PAD"] = ""
	base, err := p2p.Seal(sub.SK, wire.KindDeclaration, d, wiretest.Time)
	if err != nil {
		t.Fatal(err)
	}
	d.Declaration.Work.Env["PAD"] = strings.Repeat("x", wire.MaxDeclarationEnvelope-len(base.Raw)-8)
	big, err := p2p.Seal(sub.SK, wire.KindDeclaration, d, wiretest.Time)
	if err != nil {
		t.Fatal(err)
	}
	if len(big.Raw) > wire.MaxDeclarationEnvelope || len(big.Raw) < wire.MaxDeclarationEnvelope-64 {
		t.Fatalf("test declaration is %d bytes, want just under %d", len(big.Raw), wire.MaxDeclarationEnvelope)
	}
	batches, tooLarge := wire.RequeueBatches([][]byte{big.Raw})
	if len(tooLarge) != 0 || len(batches) != 1 {
		t.Fatalf("largest declaration: %d batches, %d too large", len(batches), len(tooLarge))
	}
	if _, err := p2p.Seal(sub.SK, wire.KindRequeue, wire.RequeueBody{Declarations: batches[0]}, wiretest.Time); err != nil {
		t.Fatalf("largest declaration does not fit a requeue: %v", err)
	}
	// One byte over is set apart rather than sealed over the limit.
	d.Declaration.Work.Env["PAD"] += strings.Repeat("y", 200)
	over, err := p2p.Seal(sub.SK, wire.KindDeclaration, d, wiretest.Time)
	if err != nil {
		t.Fatal(err)
	}
	if _, tooLarge := wire.RequeueBatches([][]byte{over.Raw}); len(tooLarge) != 1 {
		t.Fatalf("a declaration over wire.MaxDeclarationEnvelope (%d > %d) was batched", len(over.Raw), wire.MaxDeclarationEnvelope)
	}
}

// TestOfferHoldingsFitPayload: an offer of the largest kind (MaxOfferGPUs
// devices would not be usual; a full machine's eight are) that holds more
// roots than its holdings can name still seals well under the gossip
// payload limit, and passes the validator.
func TestOfferHoldingsFitPayload(t *testing.T) {
	prov := wiretest.SeededParty(t, 1)
	b := wiretest.Offer(prov.ID)
	for i := 2; i < 8; i++ {
		g := b.Offer.GPUs[0]
		g.Index, g.UUID = i, fmt.Sprintf("GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c%02d", i+1)
		b.Offer.GPUs = append(b.Offer.GPUs, g)
	}
	var held []market.Datum
	for i := range market.MaxHeldRoots + market.HoldingsBloomCapacity + 100 {
		held = append(held, market.Datum{Root: wiretest.CID(t, fmt.Sprint("held-", i)), Size: uint64(i+1) << 20})
	}
	b.Offer.Holdings = market.NewHoldings(held)
	s := wiretest.OnWire(t, prov, wire.KindOffer, b)
	if err := wire.ValidateOffer(s); err != nil {
		t.Fatal(err)
	}
	sealed, err := p2p.Seal(prov.SK, wire.KindOffer, b, wiretest.Time)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed.Raw) > p2p.MaxPayload/2 {
		t.Errorf("offer with full holdings seals to %d bytes, want at most half of %d", len(sealed.Raw), p2p.MaxPayload)
	}
	t.Logf("offer with %d roots held: %d bytes sealed", len(held), len(sealed.Raw))
}

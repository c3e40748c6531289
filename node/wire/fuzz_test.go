package wire_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/jobstate"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/p2p/peertext"
	"github.com/ipfs/go-cid"
)

// The fuzz targets below feed the body validators of the gossip topics and
// the request decoders of the direct streams what a hostile peer could send.
// The envelope around a gossip body is p2p's concern (FuzzOpen); here the
// signer is taken as proven, and the question is what a signer can make a
// body say. Identities are seeded, so that corpus files under testdata/fuzz
// naming them stay valid.

// sealedBody is the body of a message as a receiving peer opens it.
func sealedBody(tb testing.TB, signer wiretest.Party, kind string, body any) []byte {
	tb.Helper()
	return []byte(wiretest.OnWire(tb, signer, kind, body).Message.Body)
}

func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func FuzzOfferBody(f *testing.F) {
	prov, other := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 3)

	valid := wiretest.Offer(prov.ID)
	cpuOnly := wiretest.Offer(prov.ID)
	cpuOnly.Offer.GPUs = nil
	eight := wiretest.Offer(prov.ID)
	eight.Offer.GPUs = nil
	for i := range 8 {
		eight.Offer.GPUs = append(eight.Offer.GPUs, valid.Offer.GPUs[0])
		eight.Offer.GPUs[i].Index = i
		eight.Offer.GPUs[i].UUID = fmt.Sprintf("GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c%02d", i)
	}
	eight.HeartbeatMs = 50
	announcing := wiretest.Offer(prov.ID)
	announcing.GossipP99Ms = 312
	capped := wiretest.Offer(prov.ID)
	capped.Offer.MaxJobDisk = 100 << 30
	capped.Offer.NoCPUJobs = true
	full := wiretest.Offer(prov.ID)
	full.Offer.NoDisk = market.DiskFull
	// A provider holding thousands of roots: the largest listed, the rest
	// in a filter.
	holding := wiretest.Offer(prov.ID)
	var held []market.Datum
	for i := range 600 {
		held = append(held, market.Datum{Root: wiretest.CID(f, fmt.Sprint("held-", i)), Size: uint64(i+1) << 20})
	}
	holding.Offer.Holdings = market.NewHoldings(held)
	// A model that writes the reader's clipboard is accepted, to be
	// cleaned by DecodeOffer.
	clipboard := wiretest.Offer(prov.ID)
	clipboard.Offer.GPUs[0].Model = "NVIDIA H200\x1b]52;c;cHduZWQ=\a\u202e"
	priced := wiretest.Offer(prov.ID)
	priced.Offer.Price, priced.Currency = 2_400_000, "credits"
	for _, b := range []wire.OfferBody{valid, cpuOnly, eight, announcing, capped, full, holding, clipboard, priced} {
		s := wiretest.OnWire(f, prov, wire.KindOffer, b)
		if err := wire.ValidateOffer(s); err != nil {
			f.Fatalf("valid seed refused: %v", err)
		}
		f.Add([]byte(s.Message.Body))
	}

	foreign := wiretest.Offer(other.ID)
	dupIndex := wiretest.Offer(prov.ID)
	dupIndex.Offer.GPUs[1].Index = 0
	silent := wiretest.Offer(prov.ID)
	silent.HeartbeatMs = 0
	slowest := wiretest.Offer(prov.ID)
	slowest.GossipP99Ms = wire.MaxGossipP99Ms + 1
	backwards := wiretest.Offer(prov.ID)
	backwards.GossipP99Ms = -1
	badFilter := wiretest.Offer(prov.ID)
	badFilter.Offer.Holdings = market.Holdings{Bloom: holding.Offer.Holdings.Bloom[:64]}
	unsorted := wiretest.Offer(prov.ID)
	unsorted.Offer.Holdings = market.Holdings{Roots: []market.Datum{holding.Offer.Holdings.Roots[1], holding.Offer.Holdings.Roots[0]}}
	escUUID := wiretest.Offer(prov.ID)
	escUUID.Offer.GPUs[1].UUID += "\x1b[2J"
	bidiAddr := wiretest.Offer(prov.ID)
	bidiAddr.Addrs = append(bidiAddr.Addrs, "/dns4/\u202eexample.com/tcp/4001")
	escNoDisk := wiretest.Offer(prov.ID)
	escNoDisk.Offer.NoDisk = "full\x1b[2J"
	negative := wiretest.Offer(prov.ID)
	negative.Offer.Price = -1
	dearest := wiretest.Offer(prov.ID)
	dearest.Offer.Price = market.MaxPrice + 1
	escCurrency := wiretest.Offer(prov.ID)
	escCurrency.Offer.Price, escCurrency.Currency = 1, "cr\x1b[2J"
	for _, b := range []wire.OfferBody{foreign, dupIndex, silent, slowest, backwards, badFilter, unsorted, escUUID, bidiAddr, escNoDisk, negative, dearest, escCurrency} {
		f.Add(sealedBody(f, prov, wire.KindOffer, b))
	}
	body := sealedBody(f, prov, wire.KindOffer, valid)
	f.Add(append(bytes.Clone(body), `{}`...))
	f.Add(bytes.Replace(body, []byte(`"addrs"`), []byte(`"extra"`), 1))

	f.Fuzz(func(t *testing.T, body []byte) {
		s := p2p.Signed{Signer: prov.ID, Message: p2p.Message{Kind: wire.KindOffer, Body: body}}
		if wire.ValidateOffer(s) != nil {
			return
		}
		var b wire.OfferBody
		if err := s.Decode(&b); err != nil {
			t.Fatalf("accepted, but the body does not decode: %v", err)
		}
		// In a class scope, only an offer of the class passes.
		scope := p2p.Shard{Class: "H200x1-4", Count: 1}
		if wire.OfferValidator(scope)(s) == nil {
			if d, _ := wire.DecodeOffer(s); market.ClassOf(d.Offer.GPUs) != "H200x1-4" {
				t.Fatalf("accepted on %s's topic an offer of class %s", scope, market.ClassOf(d.Offer.GPUs))
			}
		}
		if err := b.Check(prov.ID); err != nil {
			t.Fatalf("accepted, but check refuses it: %v", err)
		}
		// The same rules again, stated without check, so that a change to
		// check that loosens them fails here.
		if b.Offer.Provider != prov.ID.String() {
			t.Fatalf("accepted an offer for %q signed by %s", b.Offer.Provider, prov.ID)
		}
		if len(b.Offer.GPUs) > wire.MaxOfferGPUs || len(b.Addrs) > wire.MaxOfferAddrs || b.Offer.CPUs < 0 {
			t.Fatalf("accepted an offer out of bounds: %d GPUs, %d addrs, %d CPUs", len(b.Offer.GPUs), len(b.Addrs), b.Offer.CPUs)
		}
		if len(b.Offer.NoDisk) > 32 || strings.ContainsFunc(b.Offer.NoDisk, func(c rune) bool { return (c < 'a' || c > 'z') && c != '-' }) {
			t.Fatalf("accepted no_disk %q", b.Offer.NoDisk)
		}
		hb := time.Duration(b.HeartbeatMs) * time.Millisecond
		if hb < 50*time.Millisecond || hb > time.Hour {
			t.Fatalf("accepted heartbeat %dms", b.HeartbeatMs)
		}
		if b.GossipP99Ms < 0 || b.GossipP99Ms > int64(time.Minute/time.Millisecond) {
			t.Fatalf("accepted gossip p99 %dms", b.GossipP99Ms)
		}
		idx, uuid := map[int]bool{}, map[string]bool{}
		for _, g := range b.Offer.GPUs {
			if g.Index < 0 || g.UUID == "" || idx[g.Index] || uuid[g.UUID] {
				t.Fatalf("accepted GPU %+v: negative, empty or repeated", g)
			}
			idx[g.Index], uuid[g.UUID] = true, true
		}
		if h := b.Offer.Holdings; len(h.Roots) > market.MaxHeldRoots || len(h.Bloom) > 24+8*(market.MaxHoldingsBloomBits+63)/64 {
			t.Fatalf("accepted holdings of %d roots and a %d-byte filter", len(h.Roots), len(h.Bloom))
		}
		// What a node keeps of an accepted offer holds nothing a terminal
		// obeys: UUIDs and addresses as they came, models cleaned.
		d, err := wire.DecodeOffer(s)
		if err != nil {
			t.Fatalf("accepted, but DecodeOffer refuses it: %v", err)
		}
		for i, g := range d.Offer.GPUs {
			if strings.ContainsFunc(g.UUID+g.Model, peertext.Unsafe) || !utf8.ValidString(g.UUID+g.Model) {
				t.Fatalf("GPU %d kept uuid %q, model %q", i, g.UUID, g.Model)
			}
			if g.UUID != b.Offer.GPUs[i].UUID || g.Model != peertext.Clean(b.Offer.GPUs[i].Model) {
				t.Fatalf("GPU %d decoded as %+v from %+v", i, g, b.Offer.GPUs[i])
			}
		}
		for _, a := range d.Addrs {
			if strings.ContainsFunc(a, peertext.Unsafe) || !utf8.ValidString(a) {
				t.Fatalf("accepted address %q", a)
			}
		}
	})
}

// jobKinds are the kinds FuzzJobMessage sends; the last is foreign to the
// jobs topic.
var jobKinds = [...]string{wire.KindDeclaration, wire.KindWithdrawal, wire.KindLease, wire.KindRelease, wire.KindOffer}

// jobSelector packs a kind and a signer (0 provider, 1 submitter, 2 a third
// wiretest.Party) into FuzzJobMessage's first argument.
func jobSelector(kind string, signer int) byte {
	for i, k := range jobKinds {
		if k == kind {
			return byte(i + len(jobKinds)*signer)
		}
	}
	panic("unknown kind " + kind)
}

func FuzzJobMessage(f *testing.F) {
	prov, sub, other := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 2), wiretest.SeededParty(f, 3)
	signers := [...]wiretest.Party{prov, sub, other}

	lease := wiretest.SignedLease(f, prov, sub)
	forgedLease := lease
	if err := forgedLease.SignProvider(other.SK); err != nil {
		f.Fatal(err)
	}
	provOnly := lease
	provOnly.SubmitterSig = nil
	decl := wiretest.Declaration(f, wiretest.CID(f, "shard-0"), wiretest.CID(f, "shard-1"))
	bare := wiretest.Declaration(f)
	resumed := wiretest.Declaration(f, wiretest.CID(f, "shard-0"))
	resumed.ResumeOf = "q3v7kz2mxa4bnc6dpe8f"
	localPath := wiretest.Declaration(f, "/home/alice/data")
	sized := wiretest.Declaration(f, wiretest.CID(f, "shard-0"))
	sized.Declaration.Data[0].Size = 100 << 30
	sized.Declaration.Request.LocalityWait = 30 * market.Second
	indexed := wiretest.Declaration(f)
	indexed.Declaration.Array = &market.Array{Indices: []int{7, 40, 73}, Parallel: 5}
	badIndices := wiretest.Declaration(f)
	badIndices.Declaration.Array = &market.Array{Indices: []int{40, 7, 7}}
	inClass := wiretest.Declaration(f)
	inClass.Market = &p2p.Shard{Class: "H100x8", Index: 1, Count: 4}
	inNoClass := wiretest.Declaration(f)
	inNoClass.Market = &p2p.Shard{Index: 1, Count: 4}
	release := wiretest.Release(prov.ID, sub.ID)

	for _, s := range []struct {
		kind   string
		signer int
		body   any
		ok     bool
	}{
		{wire.KindDeclaration, 1, decl, true},
		{wire.KindDeclaration, 1, bare, true},
		{wire.KindDeclaration, 1, resumed, true},
		{wire.KindDeclaration, 1, sized, true},
		{wire.KindDeclaration, 1, indexed, true},
		{wire.KindDeclaration, 1, badIndices, false},
		{wire.KindDeclaration, 1, inClass, true},
		{wire.KindDeclaration, 1, inNoClass, false},
		{wire.KindWithdrawal, 1, wire.WithdrawalBody{Job: "q3v7kz2mxa4bnc6dpe8f"}, true},
		{wire.KindLease, 0, lease, true},
		{wire.KindRelease, 0, release, true},
		{wire.KindRelease, 1, release, true},
		{wire.KindDeclaration, 1, localPath, false},
		{wire.KindWithdrawal, 1, wire.WithdrawalBody{}, false},
		{wire.KindLease, 0, forgedLease, false},
		{wire.KindLease, 0, provOnly, false},
		{wire.KindLease, 2, lease, false},
		{wire.KindRelease, 2, release, false},
		{wire.KindOffer, 0, wiretest.Offer(prov.ID), false},
	} {
		m := wiretest.OnWire(f, signers[s.signer], s.kind, s.body)
		if err := wire.ValidateJobMessage(m); (err == nil) != s.ok {
			f.Fatalf("seed %s by wiretest.Party %d: wire.ValidateJobMessage = %v, want accepted %t", s.kind, s.signer, err, s.ok)
		}
		f.Add(jobSelector(s.kind, s.signer), []byte(m.Message.Body))
	}

	f.Fuzz(func(t *testing.T, sel byte, body []byte) {
		kind := jobKinds[int(sel)%len(jobKinds)]
		signer := signers[int(sel)/len(jobKinds)%len(signers)]
		s := p2p.Signed{Signer: signer.ID, Message: p2p.Message{Kind: kind, Body: body}}
		if wire.ValidateJobMessage(s) != nil {
			return
		}
		switch kind {
		case wire.KindDeclaration:
			var b wire.DeclarationBody
			if err := s.Decode(&b); err != nil {
				t.Fatalf("accepted, but the body does not decode: %v", err)
			}
			if err := b.Declaration.Validate(); err != nil {
				t.Fatalf("accepted an invalid declaration: %v", err)
			}
			for i, in := range b.Declaration.Data {
				if _, err := cid.Decode(in.Source); err != nil {
					t.Fatalf("accepted data[%d].source %q, not a CID", i, in.Source)
				}
			}
			if m := b.Market; m != nil {
				if _, err := market.ParseClass(m.Class); err != nil || m.Valid() != nil {
					t.Fatalf("accepted a declaration in market %+v, no class market", *m)
				}
			}
		case wire.KindWithdrawal:
			var b wire.WithdrawalBody
			if err := s.Decode(&b); err != nil {
				t.Fatalf("accepted, but the body does not decode: %v", err)
			}
			if b.Job == "" || len(b.Job) > 64 {
				t.Fatalf("accepted withdrawal of job %q", b.Job)
			}
		case wire.KindLease:
			var b wire.SignedLease
			if err := s.Decode(&b); err != nil {
				t.Fatalf("accepted, but the body does not decode: %v", err)
			}
			if b.Terms.Provider != signer.ID.String() {
				t.Fatalf("accepted a lease for provider %q announced by %s", b.Terms.Provider, signer.ID)
			}
			if err := b.Verify(true); err != nil {
				t.Fatalf("accepted a lease whose signatures do not verify: %v", err)
			}
			if err := wire.CheckTerms(b.Terms); err != nil {
				t.Fatalf("accepted lease terms: %v", err)
			}
		case wire.KindRelease:
			var b wire.ReleaseBody
			if err := s.Decode(&b); err != nil {
				t.Fatalf("accepted, but the body does not decode: %v", err)
			}
			if b.Provider != signer.ID.String() && b.Submitter != signer.ID.String() {
				t.Fatalf("accepted a release signed by %s, a wiretest.Party to neither side", signer.ID)
			}
			if b.Lease == "" {
				t.Fatal("accepted a release of no lease")
			}
		default:
			t.Fatalf("accepted kind %q on the jobs topic", kind)
		}
	})
}

// roundTrip decodes body as the stream handlers do. What is accepted must
// encode and decode again to the same value once norm has put it in the
// form encoding/json writes.
func roundTrip[T any](t *testing.T, body []byte, norm func(*T)) (T, bool) {
	var v T
	if p2p.DecodeStrict(body, &v) != nil {
		return v, false
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T accepted but does not encode: %v", v, err)
	}
	var back T
	if err := p2p.DecodeStrict(enc, &back); err != nil {
		t.Fatalf("%T encodes to %s, which does not decode: %v", v, enc, err)
	}
	want := v
	if norm != nil {
		norm(&want)
	}
	if !reflect.DeepEqual(want, back) {
		t.Fatalf("%T changed on a round trip\n%#v\nto\n%#v", v, want, back)
	}
	again, err := json.Marshal(back)
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("%T encoding not stable:\n%s\n%s", v, enc, again)
	}
	return v, true
}

// sameJSON reports whether two JSON texts hold the same value; a raw field
// keeps its sender's spacing and escapes, which encoding/json rewrites.
func sameJSON(a, b []byte) bool {
	decode := func(b []byte) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

func FuzzStreamRequests(f *testing.F) {
	prov, sub := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 2)

	proposal := wiretest.SignedLease(f, prov, sub)
	proposal.SubmitterSig = nil
	f.Add(mustMarshal(f, wire.ProposeRequest{Lease: proposal}))
	f.Add(mustMarshal(f, wire.ProposeRequest{Lease: wiretest.SignedLease(f, prov, sub)}))
	terms := wiretest.Terms(prov.ID, sub.ID)
	f.Add(mustMarshal(f, wire.EventRequest{Lease: terms.ID, Job: terms.Job, Step: jobstate.StepRun, At: terms.Proposed + 2000}))
	f.Add(mustMarshal(f, wire.EventRequest{Lease: terms.ID, Job: terms.Job, At: terms.Proposed + 600_000, Checkpoint: wiretest.CID(f, "checkpoint-1"), N: 1}))
	f.Add(mustMarshal(f, wire.OutputRequest{Lease: terms.ID, Job: terms.Job, Output: wiretest.CID(f, "output")}))
	f.Add(mustMarshal(f, wire.OutputRequest{Lease: terms.ID, Job: terms.Job, Output: wiretest.CID(f, "output"),
		Steps: []wire.StepAt{{Step: jobstate.StepRun, At: terms.Proposed + 2000}, {Step: jobstate.StepOutput, At: terms.Proposed + 3000}}}))
	f.Add(mustMarshal(f, wire.WithdrawRequest{Lease: terms.ID, Job: terms.Job}))
	r := ledger.Receipt{
		Lease: terms.ID, Job: terms.Job, Provider: prov.ID, Submitter: sub.ID, GPUs: len(terms.GPUs),
		HeldFrom: time.UnixMilli(terms.Proposed), HeldUntil: time.UnixMilli(terms.Proposed + 900_000), Phase: ledger.PhaseRun,
	}
	if err := r.SignProvider(prov.SK); err != nil {
		f.Fatal(err)
	}
	f.Add(mustMarshal(f, wire.ReceiptRequest{Receipt: mustMarshal(f, r)}))
	f.Add(mustMarshal(f, wire.ReceiptRequest{Receipt: mustMarshal(f, r), Steps: []wire.StepAt{{Step: jobstate.StepRun, At: terms.Proposed + 2000}}}))
	f.Add([]byte(`{"receipt":{},"steps":[{"step":"release","at":-1},{"step":"run"}]}`))
	f.Add([]byte(`{"receipt": {"lease": "<l&>" , "seq" : 1.0}}`))
	f.Add([]byte(`{"lease":"a","job":"b"} {"lease":"a"}`))
	f.Add([]byte(`{"lease":"a","job":"b","pad":1}`))
	f.Add([]byte(`{"LEASE":"a","Job":"b"}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		if req, ok := roundTrip(t, body, func(v *wire.ProposeRequest) {
			// omitempty drops an empty countersignature.
			if len(v.Lease.SubmitterSig) == 0 {
				v.Lease.SubmitterSig = nil
			}
		}); ok {
			// What handleProposal checks before it looks at any state.
			_ = req.Lease.Verify(false)
			_ = wire.CheckTerms(req.Lease.Terms)
		}
		if ev, ok := roundTrip[wire.EventRequest](t, body, nil); ok && ev.Checkpoint != "" {
			_, _ = cid.Decode(ev.Checkpoint)
		}
		if out, ok := roundTrip(t, body, func(v *wire.OutputRequest) {
			// omitempty drops empty lists.
			if len(v.Skipped) == 0 {
				v.Skipped = nil
			}
			if len(v.Steps) == 0 {
				v.Steps = nil
			}
		}); ok {
			_, _ = cid.Decode(out.Output)
		}
		roundTrip[wire.WithdrawRequest](t, body, nil)

		var req wire.ReceiptRequest
		if p2p.DecodeStrict(body, &req) != nil {
			return
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("receipt request accepted but does not encode: %v", err)
		}
		var back wire.ReceiptRequest
		if err := p2p.DecodeStrict(enc, &back); err != nil {
			t.Fatalf("receipt request encodes to %s, which does not decode: %v", enc, err)
		}
		want := req.Receipt
		if want == nil {
			want = json.RawMessage("null") // an absent field is written as null
		}
		if !sameJSON(want, back.Receipt) {
			t.Fatalf("receipt changed on a round trip: %s to %s", want, back.Receipt)
		}
		if r, err := ledger.DecodeReceipt(req.Receipt); err == nil {
			_ = r.Verify()
		}
	})
}

package view

import (
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// Two peers that hold the same messages, received at different instants,
// and that pass at different instants, build the same view between epochs:
// the same hash, so Match's seed and every tie come out the same.
func TestCurrentIsTheSameOnEveryPeer(t *testing.T) {
	sub := wiretest.FreshParty(t)
	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "input")))
	var db wire.DeclarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	signed := decl.Time()
	offer := func(name string, signedAt time.Time) SignedOffer {
		o := market.Offer{Provider: name, CPUs: 256, MemoryBytes: 4 << 40}
		for i := range 8 {
			o.GPUs = append(o.GPUs, market.GPU{Index: i, UUID: name + "-GPU-" + string(rune('0'+i)), Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, Free: true})
		}
		return SignedOffer{Offer: o, SignedAt: signedAt.UnixMilli()}
	}
	// Two providers just as free: only the seed tells them apart.
	offers := []SignedOffer{offer("p1", signed.Add(-3*time.Second)), offer("p2", signed.Add(-2*time.Second))}
	epochOf := func(t time.Time) uint64 { return uint64(t.UnixMilli() / 1000) }
	firstEpoch := func(s Stamp) time.Time { return s.Signed.Truncate(time.Second).Add(time.Second) }

	view := func(arrival, pass time.Duration) market.View {
		v := NewMarket()
		v.AddJob(&OpenJob{ID: wire.JobID(decl), Submitter: sub.ID, Body: db, Seen: signed.Add(arrival), Signed: signed})
		return v.Current(signed.Add(pass), offers, epochOf, firstEpoch)
	}
	a := market.Match(view(2*time.Millisecond, 3*time.Millisecond), market.Options{})
	b := market.Match(view(40*time.Millisecond, 900*time.Millisecond), market.Options{})
	if a.ViewHash != b.ViewHash {
		t.Fatalf("the same messages give views %s and %s", a.ViewHash, b.ViewHash)
	}
	if len(a.Assignments) != 1 || len(b.Assignments) != 1 || a.Assignments[0].Provider != b.Assignments[0].Provider {
		t.Fatalf("assignments differ: %+v, %+v", a.Assignments, b.Assignments)
	}
}

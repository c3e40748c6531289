package epoch

import (
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// openJob declares a job named name as sub, as a view holds it.
func openJob(t *testing.T, sub wiretest.Party, name string, now time.Time) *view.OpenJob {
	t.Helper()
	b := wiretest.Declaration(t)
	b.Declaration.Name = name
	s := wiretest.OnWire(t, sub, wire.KindDeclaration, b)
	if err := wire.ValidateJobMessage(s); err != nil {
		t.Fatal(err)
	}
	return &view.OpenJob{ID: wire.JobID(s), Submitter: sub.ID, Body: b, Seen: now, Signed: now, Hash: s.Hash()}
}

// A job declared a moment after the Judge's last pass is not in that
// pass's view: asked about it within judgeFresh, the Judge passes again
// rather than answer from a pass that never saw it. A provider staging
// the job's inputs at once, on its own pass, was refused otherwise.
func TestJudgeAsksAgainOfAJobItsLastPassDidNotHold(t *testing.T) {
	now := time.Now()
	prov, sub := wiretest.FreshParty(t), wiretest.FreshParty(t)
	offers := view.NewOffers()
	ob := wiretest.Offer(prov.ID)
	ob.Offer.GPUs = append(ob.Offer.GPUs, ob.Offer.GPUs...)
	for i := range ob.Offer.GPUs {
		ob.Offer.GPUs[i].Index, ob.Offer.GPUs[i].Free = i, true
		ob.Offer.GPUs[i].UUID = ob.Offer.GPUs[i].UUID[:len(ob.Offer.GPUs[i].UUID)-1] + string(rune('a'+i))
	}
	offers.Apply(ob, now.UnixMilli(), now)
	m := view.NewMarket()
	j := &Judge{Clock: Clock{Length: time.Second, Fixed: 100 * time.Millisecond, Offers: offers}, Market: m, Log: slog.New(slog.DiscardHandler)}
	first := openJob(t, sub, "first", now)
	m.AddJob(first)
	if !j.Assigns(first.ID, prov.ID.String(), now) {
		t.Fatal("the only provider, with room, is not given the only job")
	}
	second := openJob(t, sub, "second", now)
	m.AddJob(second)
	if !j.Assigns(second.ID, prov.ID.String(), now.Add(time.Millisecond)) {
		t.Fatal("a job declared after the last pass: answered no from a pass that did not hold it")
	}
	if j.Assigns(second.ID, wiretest.FreshParty(t).ID.String(), now.Add(2*time.Millisecond)) {
		t.Fatal("a provider with no offer is given the job")
	}
}

package node

import (
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// The relay's members are the signers of what the topics accepted, and a
// lease's parties; they are forgotten a day after their last message.
func TestRelayPeersMembers(t *testing.T) {
	r := newRelayPeers()
	prov, sub, other, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	now := wiretest.Time
	joined := r.Joined()
	r.apply(wiretest.OnWire(t, prov, wire.KindOffer, wiretest.Offer(prov.ID)), now)
	select {
	case <-joined:
	default:
		t.Fatal("a new member did not wake the reservations waiting for one")
	}
	again := r.Joined()
	r.apply(wiretest.OnWire(t, prov, wire.KindOffer, wiretest.Offer(prov.ID)), now.Add(time.Second))
	select {
	case <-again:
		t.Fatal("a member's next offer woke the waiting reservations as if it were new")
	default:
	}
	r.apply(wiretest.OnWire(t, other, wire.KindLease, wiretest.SignedLease(t, other, sub)), now)
	for _, p := range []wiretest.Party{prov, sub, other} {
		if !r.memberAt(p, now) {
			t.Errorf("%s is no member after its message", p.ID)
		}
	}
	if r.memberAt(stranger, now) {
		t.Error("a peer never seen is a member")
	}
	later := now.Add(time.Second + memberFor) // a day after its last offer
	r.expire(later)
	if r.memberAt(prov, later) {
		t.Error("a provider silent for a day is still a member")
	}
}

// memberAt is Member with the clock at now.
func (r *relayPeers) memberAt(p wiretest.Party, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[p.ID]
	return ok && now.Sub(at) < memberFor
}

// A lease pairs its parties from its announcement to its release, by one
// of them; a release that came first keeps the announcement from pairing
// them; a lease whose release never comes ends past its limit.
func TestRelayPeersPairsLiveLeases(t *testing.T) {
	prov, sub, other := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	lease := wiretest.OnWire(t, prov, wire.KindLease, wiretest.SignedLease(t, prov, sub))
	release := wiretest.Release(prov.ID, sub.ID)
	now := wiretest.Time.Add(time.Minute)

	r := newRelayPeers()
	r.apply(lease, now)
	if !r.Paired(prov.ID, sub.ID) || !r.Paired(sub.ID, prov.ID) {
		t.Fatal("a live lease's parties are not paired")
	}
	if r.Paired(prov.ID, other.ID) {
		t.Fatal("a provider is paired with a peer it holds no lease with")
	}
	r.apply(wiretest.OnWire(t, other, wire.KindRelease, release), now)
	if !r.Paired(prov.ID, sub.ID) {
		t.Fatal("a stranger's release ended the lease")
	}
	r.apply(wiretest.OnWire(t, sub, wire.KindRelease, release), now)
	if r.Paired(prov.ID, sub.ID) {
		t.Fatal("a released lease's parties are still paired")
	}

	early := newRelayPeers()
	early.apply(wiretest.OnWire(t, prov, wire.KindRelease, release), now)
	early.apply(lease, now)
	if early.Paired(prov.ID, sub.ID) {
		t.Fatal("a lease announced after its release paired its parties")
	}

	lost := newRelayPeers()
	lost.apply(lease, now)
	terms := wiretest.Terms(prov.ID, sub.ID)
	lost.expire(time.UnixMilli(terms.Proposed).Add(time.Duration(terms.Limit)*time.Millisecond + leaseLiveSlack))
	if lost.Paired(prov.ID, sub.ID) {
		t.Fatal("a lease whose release never came pairs its parties past its limit")
	}
}

// An array's task leases, announced and released in batches, pair each
// task's parties; the providers of two tasks are not paired.
func TestRelayPeersTaskBatches(t *testing.T) {
	sub, p1, p2 := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	now := wiretest.Time.Add(time.Minute)
	l1, l2 := partLease(t, p1, sub, "arr", 0), partLease(t, p2, sub, "arr", 1)
	r := newRelayPeers()
	r.apply(wiretest.OnWire(t, sub, wire.KindTaskBatch, wire.TaskBatchBody{Leases: []wire.SignedLease{l1, l2}}), now)
	if !r.Paired(p1.ID, sub.ID) || !r.Paired(p2.ID, sub.ID) {
		t.Fatal("a task's parties are not paired")
	}
	if r.Paired(p1.ID, p2.ID) {
		t.Fatal("the providers of an array's tasks are paired, as if a gang's")
	}
	rel := wire.ReleaseBody{Lease: l1.Terms.ID, Job: l1.Terms.Job, Provider: p1.ID.String(), Submitter: sub.ID.String(), Outcome: "completed"}
	r.apply(wiretest.OnWire(t, sub, wire.KindTaskBatch, wire.TaskBatchBody{Releases: []wire.ReleaseBody{rel}}), now)
	if r.Paired(p1.ID, sub.ID) || !r.Paired(p2.ID, sub.ID) {
		t.Fatal("a batch's release did not end its task's lease alone")
	}
}

// The providers of a gang's parts are paired with each other while both
// parts' leases live.
func TestRelayPeersPairsAGangsParts(t *testing.T) {
	sub, p1, p2, p3 := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	now := wiretest.Time.Add(time.Minute)
	d := wiretest.Declaration(t)
	d.Declaration.Request.Nodes = 2
	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, d)
	gang := wire.JobID(decl)
	r := newRelayPeers()
	r.apply(decl, now)
	part0, part1 := partLease(t, p1, sub, gang, 0), partLease(t, p2, sub, gang, 1)
	r.apply(wiretest.OnWire(t, p1, wire.KindLease, part0), now)
	r.apply(wiretest.OnWire(t, p2, wire.KindLease, part1), now)
	if !r.Paired(p1.ID, p2.ID) {
		t.Fatal("a gang's parts' providers are not paired")
	}
	if r.Paired(p1.ID, p3.ID) {
		t.Fatal("a gang's provider is paired with a stranger to the gang")
	}
	rel := wire.ReleaseBody{Lease: part1.Terms.ID, Job: part1.Terms.Job, Provider: p2.ID.String(), Submitter: sub.ID.String(), Outcome: "completed"}
	r.apply(wiretest.OnWire(t, p2, wire.KindRelease, rel), now)
	if r.Paired(p1.ID, p2.ID) {
		t.Fatal("a gang's providers are still paired after one part's release")
	}
}

// partLease is the lease of part or task i of job (a gang's or an array's) by
// prov, countersigned by sub.
func partLease(t *testing.T, prov, sub wiretest.Party, job string, i int) wire.SignedLease {
	t.Helper()
	terms := wiretest.Terms(prov.ID, sub.ID)
	terms.Job = market.TaskID(job, i)
	terms.ID = wire.LeaseID(terms.Job, prov.ID.String(), terms.Proposed, 1)
	l := wire.SignedLease{Terms: terms}
	if err := l.SignProvider(prov.SK); err != nil {
		t.Fatal(err)
	}
	if err := l.Countersign(sub.SK); err != nil {
		t.Fatal(err)
	}
	return l
}

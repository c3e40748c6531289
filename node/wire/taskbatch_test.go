package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// taskLease is a lease of task i of an array, signed by both parties.
func taskLease(tb testing.TB, prov, sub wiretest.Party, i int) wire.SignedLease {
	tb.Helper()
	t := wiretest.Terms(prov.ID, sub.ID)
	t.Job = market.TaskID("q3v7kz2mxa4bnc6dpe8f", i)
	t.ID = wire.LeaseID(t.Job, t.Provider, t.Proposed, uint64(i))
	l := wire.SignedLease{Terms: t}
	if err := l.SignProvider(prov.SK); err != nil {
		tb.Fatal(err)
	}
	if err := l.Countersign(sub.SK); err != nil {
		tb.Fatal(err)
	}
	return l
}

func taskRelease(prov, sub wiretest.Party, i int) wire.ReleaseBody {
	r := wiretest.Release(prov.ID, sub.ID)
	r.Job = market.TaskID("q3v7kz2mxa4bnc6dpe8f", i)
	return r
}

// A task batch is taken from the tasks' submitter only, with leases both
// parties signed, of tasks only.
func TestCheckTaskBatch(t *testing.T) {
	prov, sub, other := wiretest.SeededParty(t, 1), wiretest.SeededParty(t, 2), wiretest.SeededParty(t, 3)
	ok := wire.TaskBatchBody{Leases: []wire.SignedLease{taskLease(t, prov, sub, 0), taskLease(t, prov, sub, 1)}, Releases: []wire.ReleaseBody{taskRelease(prov, sub, 2)}}
	if err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindTaskBatch, ok)); err != nil {
		t.Fatalf("a submitter's batch of its tasks: %v", err)
	}
	plain := wiretest.SignedLease(t, prov, sub)
	provOnly := taskLease(t, prov, sub, 4)
	provOnly.SubmitterSig = nil
	for _, tc := range []struct {
		name   string
		signer wiretest.Party
		body   wire.TaskBatchBody
		want   string
		forged bool
	}{
		{"by the provider", prov, ok, "carries a lease of submitter", true},
		{"by a stranger", other, ok, "carries a lease of submitter", true},
		{"a job that is no task", sub, wire.TaskBatchBody{Leases: []wire.SignedLease{plain}}, "is no task of an array", false},
		{"a lease the submitter did not sign", sub, wire.TaskBatchBody{Leases: []wire.SignedLease{provOnly}}, "leases[0]", true},
		{"a release of no lease", sub, wire.TaskBatchBody{Releases: []wire.ReleaseBody{{Job: market.TaskID("a", 1), Submitter: sub.ID.String()}}}, "names no lease", false},
		{"nothing", sub, wire.TaskBatchBody{}, "carries nothing", false},
	} {
		err := wire.ValidateJobMessage(wiretest.OnWire(t, tc.signer, wire.KindTaskBatch, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, p2p.ErrForged) != tc.forged {
			t.Errorf("%s: %v, want %q (forged %t)", tc.name, err, tc.want, tc.forged)
		}
	}
}

// TaskBatches keeps every item, in order, in bodies that each fit a
// gossip message.
func TestTaskBatchesFit(t *testing.T) {
	prov, sub := wiretest.SeededParty(t, 1), wiretest.SeededParty(t, 2)
	var leases []wire.SignedLease
	var releases []wire.ReleaseBody
	for i := range 400 {
		leases = append(leases, taskLease(t, prov, sub, i))
		releases = append(releases, taskRelease(prov, sub, i))
	}
	bodies := wire.TaskBatches(leases, releases)
	if len(bodies) < 2 {
		t.Fatalf("400 leases and releases in %d bodies: they cannot fit one message", len(bodies))
	}
	var nl, nr int
	for _, b := range bodies {
		if n := len(wiretest.OnWire(t, sub, wire.KindTaskBatch, b).Raw); n > p2p.MaxPayload {
			t.Fatalf("a body is %d bytes signed, over %d", n, p2p.MaxPayload)
		}
		for _, l := range b.Leases {
			if l.Terms.ID != leases[nl].Terms.ID {
				t.Fatalf("lease %d out of order", nl)
			}
			nl++
		}
		nr += len(b.Releases)
	}
	if nl != 400 || nr != 400 {
		t.Fatalf("bodies carry %d leases and %d releases, want 400 of each", nl, nr)
	}
	if wire.TaskBatches(nil, nil) != nil {
		t.Fatal("nothing to announce made a body")
	}
}

// FuzzTaskBatch feeds the jobs topic's validator task batches signed by
// a submitter: whatever it accepts carries only leases both parties
// signed and releases, all of tasks of the signer's.
func FuzzTaskBatch(f *testing.F) {
	prov, sub := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 2)
	for _, b := range []wire.TaskBatchBody{
		{Leases: []wire.SignedLease{taskLease(f, prov, sub, 0)}},
		{Releases: []wire.ReleaseBody{taskRelease(prov, sub, 1)}},
		{Leases: []wire.SignedLease{taskLease(f, prov, sub, 2)}, Releases: []wire.ReleaseBody{taskRelease(prov, sub, 2)}},
	} {
		f.Add(sealedBody(f, sub, wire.KindTaskBatch, b))
	}
	f.Add([]byte(`{"leases":[{}]}`))
	f.Add([]byte(`{"releases":[{"job":"a.1","lease":"l","provider":"p","submitter":"x"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := p2p.Signed{Signer: sub.ID, Message: p2p.Message{Kind: wire.KindTaskBatch, Body: body}}
		b, err := wire.CheckTaskBatch(s)
		if err != nil {
			return
		}
		for _, l := range b.Leases {
			if _, _, ok := market.SplitTaskID(l.Terms.Job); !ok || l.Terms.Submitter != sub.ID.String() || l.Verify(true) != nil {
				t.Fatalf("accepted lease %+v", l.Terms)
			}
		}
		for _, r := range b.Releases {
			if _, _, ok := market.SplitTaskID(r.Job); !ok || r.Submitter != sub.ID.String() || r.Lease == "" {
				t.Fatalf("accepted release %+v", r)
			}
		}
	})
}

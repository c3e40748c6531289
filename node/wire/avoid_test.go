package wire_test

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// avoidFixture is a submitter's declaration, sealed, and two providers.
type avoidFixture struct {
	sub, other wiretest.Party
	env        []byte
	job        string
	p1, p2     string
}

func newAvoidFixture(tb testing.TB) avoidFixture {
	sub, other := wiretest.SeededParty(tb, 2), wiretest.SeededParty(tb, 3)
	d, err := p2p.Seal(sub.SK, wire.KindDeclaration, wiretest.Declaration(tb), wiretest.Time)
	if err != nil {
		tb.Fatal(err)
	}
	return avoidFixture{
		sub: sub, other: other, env: d.Raw, job: wire.JobIDOf(sha256.Sum256(d.Raw)),
		p1: wiretest.SeededParty(tb, 1).ID.String(), p2: wiretest.SeededParty(tb, 4).ID.String(),
	}
}

func TestRequeueAvoid(t *testing.T) {
	f := newAvoidFixture(t)
	body := func(a ...wire.AvoidEntry) wire.RequeueBody {
		return wire.RequeueBody{Declarations: [][]byte{f.env}, Avoid: a}
	}
	hour := wiretest.Time.Add(time.Hour).UnixMilli()
	many := make([]string, wire.MaxAvoid+1)
	for i := range many {
		many[i] = wiretest.SeededParty(t, byte(10+i)).ID.String()
	}
	for _, c := range []struct {
		name   string
		signer wiretest.Party
		body   wire.RequeueBody
		err    string // "" accepted
	}{
		{"none", f.sub, body(), ""},
		{"two providers", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1, f.p2}}), ""},
		{"at the bound", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: many[:wire.MaxAvoid]}), ""},
		{"past the bound", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: many}), "providers, want 1 to"},
		{"empty list", f.sub, body(wire.AvoidEntry{Job: f.job}), "providers, want 1 to"},
		{"job not carried", f.sub, body(wire.AvoidEntry{Job: "aaaaaaaaaaaaaaaa", Providers: []string{f.p1}}), "not among the declarations"},
		{"job twice", f.sub, wire.RequeueBody{Declarations: [][]byte{f.env, f.env}, Avoid: []wire.AvoidEntry{
			{Job: f.job, Providers: []string{f.p1}}, {Job: f.job, Providers: []string{f.p2}}}}, "listed twice"},
		{"provider twice", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1, f.p1}}), "listed twice"},
		{"not a peer ID", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{"nobody"}}), "providers[0]"},
		{"the submitter itself", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.sub.ID.String()}}), "not another peer's ID"},
		{"with until", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1, f.p2}, Until: []int64{hour, hour}}), ""},
		{"until for one of two", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1, f.p2}, Until: []int64{hour}}), "1 until times for 2 providers"},
		{"until past the bound", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1}, Until: []int64{wiretest.Time.Add(wire.MaxAvoidFor + time.Hour).UnixMilli()}}), "until[0]"},
		{"until zero", f.sub, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1}, Until: []int64{0}}), "until[0]"},
		// Only the job's submitter can wrap its declaration, so only it can
		// name providers for it.
		{"another signer", f.other, body(wire.AvoidEntry{Job: f.job, Providers: []string{f.p1}}), "forged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := wiretest.OnWire(t, c.signer, wire.KindRequeue, c.body)
			_, err := wire.CheckRequeue(s)
			if c.err == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("got %v, want an error saying %q", err, c.err)
			}
		})
	}
}

func TestRequeueAvoidingFits(t *testing.T) {
	f := newAvoidFixture(t)
	var many []wire.Avoided
	until := wiretest.Time.Add(time.Hour)
	for i := range wire.MaxAvoid + 4 {
		many = append(many, wire.Avoided{Provider: wiretest.SeededParty(t, byte(40+i)).ID.String(), Until: until.Add(time.Duration(i) * time.Second)})
	}
	b := wire.RequeueAvoiding(wire.JobIDOf(sha256.Sum256(f.env)), f.env, many)
	if len(b.Avoid) != 1 || b.Avoid[0].Job != f.job {
		t.Fatalf("avoid = %+v, want one entry for %s", b.Avoid, f.job)
	}
	// The latest failures are kept.
	if got := b.Avoid[0].Providers; len(got) != wire.MaxAvoid || got[len(got)-1] != many[len(many)-1].Provider {
		t.Fatalf("kept %d providers ending %v, want the last %d", len(got), got[len(got)-1:], wire.MaxAvoid)
	}
	// Each with the time its avoid lifts.
	if u := b.Avoid[0].Until; len(u) != wire.MaxAvoid || u[len(u)-1] != many[len(many)-1].Until.UnixMilli() {
		t.Fatalf("until %v, want one a provider, the last %v", u, many[len(many)-1].Until)
	}
	s := wiretest.OnWire(t, f.sub, wire.KindRequeue, b)
	if _, err := wire.CheckRequeue(s); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Raw); n > p2p.MaxPayload {
		t.Fatalf("requeue is %d bytes, over the %d limit", n, p2p.MaxPayload)
	}
	if b := wire.RequeueAvoiding(wire.JobIDOf(sha256.Sum256(f.env)), f.env, nil); b.Avoid != nil {
		t.Fatalf("no providers gave avoid %+v", b.Avoid)
	}
}

// A task of an array is avoided under its own ID, carried by its array's
// declaration; a task of another array is not, and falls back to the
// envelope's own job.
func TestRequeueAvoidingATask(t *testing.T) {
	f := newAvoidFixture(t)
	task := market.TaskID(f.job, 3)
	b := wire.RequeueAvoiding(task, f.env, []wire.Avoided{{Provider: f.p1, Until: wiretest.Time.Add(time.Hour)}})
	if len(b.Avoid) != 1 || b.Avoid[0].Job != task {
		t.Fatalf("avoid = %+v, want one entry for task %s", b.Avoid, task)
	}
	if _, err := wire.CheckRequeue(wiretest.OnWire(t, f.sub, wire.KindRequeue, b)); err != nil {
		t.Fatalf("a task's avoid list refused: %v", err)
	}
	if b := wire.RequeueAvoiding(market.TaskID("otherarray", 3), f.env, []wire.Avoided{{Provider: f.p1, Until: wiretest.Time.Add(time.Hour)}}); b.Avoid[0].Job != f.job {
		t.Fatalf("another array's task: avoid %+v, want the envelope's job %s", b.Avoid, f.job)
	}
	forged := wire.RequeueBody{Declarations: [][]byte{f.env}, Avoid: []wire.AvoidEntry{{Job: market.TaskID("otherarray", 3), Providers: []string{f.p1}}}}
	if _, err := wire.CheckRequeue(wiretest.OnWire(t, f.sub, wire.KindRequeue, forged)); err == nil {
		t.Fatal("an avoid list for a task of an array the requeue does not carry was accepted")
	}
}

// FuzzRequeueAvoid feeds arbitrary requeue bodies signed by a submitter to
// the validator: whatever it accepts names, for each job it carries, a few
// distinct providers that are well-formed peer IDs other than the signer's.
func FuzzRequeueAvoid(f *testing.F) {
	fx := newAvoidFixture(f)
	for _, b := range []wire.RequeueBody{
		{Declarations: [][]byte{fx.env}},
		{Declarations: [][]byte{fx.env}, Avoid: []wire.AvoidEntry{{Job: fx.job, Providers: []string{fx.p1, fx.p2}}}},
		{Declarations: [][]byte{fx.env}, Avoid: []wire.AvoidEntry{{Job: fx.job, Providers: []string{fx.p1, fx.p1}}}},
		{Declarations: [][]byte{fx.env}, Avoid: []wire.AvoidEntry{{Job: "x", Providers: []string{fx.p1}}}},
		{Declarations: [][]byte{fx.env}, Avoid: []wire.AvoidEntry{{Job: fx.job, Providers: []string{fx.p1, fx.p2}, Until: []int64{1, 3_600_000}}}},
		{Declarations: [][]byte{fx.env}, Avoid: []wire.AvoidEntry{{Job: fx.job, Providers: []string{fx.p1}, Until: []int64{-5}}}},
	} {
		raw, err := json.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := p2p.Signed{Signer: fx.sub.ID, Message: p2p.Message{Kind: wire.KindRequeue, Body: body}}
		if _, err := wire.CheckRequeue(s); err != nil {
			return
		}
		var b wire.RequeueBody
		if err := s.Decode(&b); err != nil {
			t.Fatalf("accepted, but the body does not decode: %v", err)
		}
		jobs := map[string]bool{}
		for _, a := range b.Avoid {
			if jobs[a.Job] {
				t.Fatalf("accepted job %s twice", a.Job)
			}
			jobs[a.Job] = true
			if len(a.Providers) == 0 || len(a.Providers) > wire.MaxAvoid {
				t.Fatalf("accepted %d providers", len(a.Providers))
			}
			if len(a.Until) != 0 && len(a.Until) != len(a.Providers) {
				t.Fatalf("accepted %d until times for %d providers", len(a.Until), len(a.Providers))
			}
			for _, u := range a.Until {
				if u <= 0 || time.UnixMilli(u).After(s.Time().Add(wire.MaxAvoidFor)) {
					t.Fatalf("accepted until %d for an announcement at %v", u, s.Time())
				}
			}
			seen := map[string]bool{}
			for _, p := range a.Providers {
				id, err := peer.Decode(p)
				if err != nil || id == fx.sub.ID || seen[p] {
					t.Fatalf("accepted provider %q (err %v, twice %t)", p, err, seen[p])
				}
				seen[p] = true
			}
		}
	})
}

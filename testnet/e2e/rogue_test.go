package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	benchrogue "github.com/e31network/e31/testnet/bench/rogue"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
)

// The rogue peers of issue 51 ("Strangers cannot cheat") attack real
// daemons (testnet/byzantine/rogue, played by testnet/bench/rogue, the
// same as `go run ./testnet rogue-bench`), and each attack must come to
// nothing: refused with its code, disputed, or bounded, the refusal named
// in the victim's log and counted in e31_refused_total, while the honest
// jobs beside the attacks complete.

// rogueOptions sizes the attacks for a test: the flood's checkpoints
// larger than the most one pull of the job may take (pullCap), so that
// every pull of one must be refused.
func rogueOptions(t *testing.T) benchrogue.Options {
	return benchrogue.Options{
		E31: bin.E31, Dir: t.TempDir(),
		Flood: rogue.FloodOptions{Events: 100, DAGs: 2, DAGBytes: 96 << 20},
		Disk:  16 * market.MiB, InputBytes: 1 << 20,
		// Three rounds of the rogue's gang, each costing the providers'
		// gang wait (SubmitterNet's --gang-start-within): after two
		// lapses in a row neither provider takes its part again.
		SquatRounds: 2, GangRounds: 3,
		Log: t.Logf,
	}
}

// pullCap is the most one pull of a checkpoint or output may take from a
// job's provider: what the job may write (request.disk, and the structure
// of its blocks, a 64th more) and the logs beside it (stdout and stderr,
// each kept at most twice exec.DefaultLogCap), with room.
func pullCap(disk market.Size) int64 {
	return int64(disk) + int64(disk)/64 + 8*exec.DefaultLogCap
}

// logOutcome logs every attack's result, as the bench's table has it.
func logOutcome(t *testing.T, out benchrogue.Outcome) {
	t.Helper()
	for _, r := range out.Results {
		t.Logf("%s: %s", r.Attack, r.Summary())
	}
	for a, e := range out.Errors {
		t.Errorf("%s was not carried out: %s", a, e)
	}
}

// attack returns an attack's result, failing the test if it was not made.
func attack(t *testing.T, out benchrogue.Outcome, name string) rogue.Result {
	t.Helper()
	r, ok := out.Result(name)
	if !ok {
		t.Fatalf("no result of %s", name)
	}
	return r
}

// wantRefused fails unless the step what of r was refused with one of
// codes.
func wantRefused(t *testing.T, r rogue.Result, what string, codes ...string) {
	t.Helper()
	s, ok := r.Step(what)
	if !ok {
		t.Fatalf("%s: no step %q in %s", r.Attack, what, r.Summary())
	}
	if s.Answer != rogue.Refused || !slices.Contains(codes, s.Code) {
		t.Fatalf("%s: %s was answered %s %q (%s), want refused %v", r.Attack, what, s.Answer, s.Code, s.Err, codes)
	}
}

// wantAnswer fails unless the step what of r was answered answer.
func wantAnswer(t *testing.T, r rogue.Result, what, answer string) {
	t.Helper()
	s, ok := r.Step(what)
	if !ok {
		t.Fatalf("%s: no step %q in %s", r.Attack, what, r.Summary())
	}
	if s.Answer != answer {
		t.Fatalf("%s: %s was answered %s %q (%s), want %s", r.Attack, what, s.Answer, s.Code, s.Err, answer)
	}
}

// checkRefusalsNamed checks that every refusal code a rogue met on node i
// is counted in the node's e31_refused_total and named in its log.
func checkRefusalsNamed(t *testing.T, c *cluster.Cluster, out benchrogue.Outcome, i int) {
	t.Helper()
	n := c.Nodes[i]
	codes := map[string]bool{}
	for _, r := range out.Results {
		if v, ok := out.Victims[r.Attack]; !ok || v != i {
			continue
		}
		for _, s := range r.Steps {
			if s.Answer == rogue.Refused && s.Code != "" {
				codes[s.Code] = true
			}
		}
	}
	log, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	for code := range codes {
		counted := false
		for k, v := range out.Refused[n.Name] {
			counted = counted || (strings.HasSuffix(k, " "+code) && v > 0)
		}
		if !counted {
			t.Errorf("%s refused with %s, but e31_refused_total does not count it: %v", n.Name, code, out.Refused[n.Name])
		}
		named := false
		for line := range strings.Lines(string(log)) {
			named = named || (strings.Contains(line, "refused") && strings.Contains(line, "code="+code))
		}
		if !named {
			t.Errorf("%s refused with %s, but its log names no such refusal", n.Name, code)
		}
	}
}

// checkHonest fails unless every honest job completed.
func checkHonest(t *testing.T, out benchrogue.Outcome) {
	t.Helper()
	for _, j := range out.Honest {
		if j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeCompleted) {
			t.Errorf("honest job %s (%s) ended %s/%s: %s", j.ID, j.Name, j.State, j.Outcome, j.Reason)
		}
	}
}

// TestRogueProviders: rogue providers attack an honest submitter, each
// attack from a fresh identity. A proposal dated 1970 is refused stale; a
// proposal with no offer no-offer, and one for a job Match gave another
// provider not-assigned (or not-queued, if the honest lease came first).
// Under a genuine lease (the only offer of the job's GPU model), receipts
// outside the lease's time are refused outside-lease and one after the
// final receipt after-final; a final receipt that claims an output never
// handed over, or a checkpoint_at with no checkpoint event, is disputed.
// Staging a queued job it was not reserved is refused not-reserved, with
// nothing of the input obtained; a flood of checkpoint events larger than
// the job's disk costs the submitter one pull at a time, each within the
// disk; an offer's terminal escapes never reach `e31 nodes`.
func TestRogueProviders(t *testing.T) {
	c := start(t, benchrogue.ProviderNet())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := rogueOptions(t)
	out, err := benchrogue.ProviderAttacks(ctx, c, o)
	logOutcome(t, out)
	if err != nil {
		t.Fatal(err)
	}
	sub := c.Client(0)

	t.Run("backdated", func(t *testing.T) {
		r := attack(t, out, rogue.AttackBackdated)
		wantRefused(t, r, "proposal dated 1970", wire.CodeStale)
		if r.GPUHours != 0 {
			t.Fatalf("%v GPU-hours countersigned", r.GPUHours)
		}
	})
	t.Run("no offer", func(t *testing.T) {
		wantRefused(t, attack(t, out, rogue.AttackNoOffer), "proposal without an offer", wire.CodeNoOffer)
	})
	t.Run("not assigned", func(t *testing.T) {
		wantRefused(t, attack(t, out, rogue.AttackNotAssigned), "proposal for a job Match gave another", wire.CodeNotAssigned, wire.CodeNotQueued)
		j, err := sub.Job(ctx, out.Jobs[rogue.AttackNotAssigned])
		if err != nil {
			t.Fatal(err)
		}
		if j.Provider != c.Nodes[2].PeerID || j.Outcome != string(ledger.OutcomeCompleted) {
			t.Fatalf("the job Match gave node 2 ended %s/%s on %s", j.State, j.Outcome, j.Provider)
		}
	})
	t.Run("past the limit", func(t *testing.T) {
		r := attack(t, out, rogue.AttackPastLimit)
		wantRefused(t, r, "receipt held from 1970", wire.CodeOutsideLease)
		wantRefused(t, r, "receipt held to 10× the limit", wire.CodeOutsideLease)
		if r.GPUHours != 0 {
			t.Fatalf("%v GPU-hours countersigned", r.GPUHours)
		}
	})
	t.Run("after final", func(t *testing.T) {
		r := attack(t, out, rogue.AttackAfterFinal)
		wantAnswer(t, r, "final receipt", rogue.Countersigned)
		wantRefused(t, r, "interim receipt after it", wire.CodeAfterFinal)
	})
	t.Run("stage unreserved", func(t *testing.T) {
		r := attack(t, out, rogue.AttackStage)
		wantRefused(t, r, "stage request", wire.CodeNotReserved)
		if r.Bytes != 0 {
			t.Fatalf("the rogue obtained %d bytes of the input", r.Bytes)
		}
	})
	t.Run("false completed", func(t *testing.T) {
		wantAnswer(t, attack(t, out, rogue.AttackFalseCompleted), "final receipt: completed, output never handed over", rogue.Disputed)
		j, err := sub.Job(ctx, out.Jobs[rogue.AttackFalseCompleted])
		if err != nil {
			t.Fatal(err)
		}
		if j.Outcome == string(ledger.OutcomeCompleted) {
			t.Fatalf("the job is recorded completed, output %q, on the rogue's word", j.Output)
		}
	})
	t.Run("false checkpoint_at", func(t *testing.T) {
		wantAnswer(t, attack(t, out, rogue.AttackFalseCheckpoint), "final receipt: preempted, checkpoint_at with no checkpoint event", rogue.Disputed)
	})
	t.Run("checkpoint flood", func(t *testing.T) {
		r := attack(t, out, rogue.AttackCheckpointFlood)
		pulls := 0
		for _, s := range r.Steps {
			if s.What != "checkpoint event" {
				continue
			}
			switch {
			case s.Answer == rogue.Accepted:
				pulls++
			case s.Answer != rogue.Refused || (s.Code != wire.CodeCheckpointOrder && s.Code != wire.CodeCheckpointTooLarge):
				t.Errorf("a checkpoint event was answered %s %q (%s)", s.Answer, s.Code, s.Err)
			}
		}
		if r.Concurrent > 1 {
			t.Errorf("the submitter pulled %d checkpoints of one lease at once", r.Concurrent)
		}
		if out.Returned > float64(pulls)*float64(pullCap(o.Disk)) {
			t.Errorf("the submitter fetched %.0f bytes for %d pulls, over %d each", out.Returned, pulls, pullCap(o.Disk))
		}
		j, err := sub.Job(ctx, out.Jobs[rogue.AttackCheckpointFlood])
		if err != nil {
			t.Fatal(err)
		}
		if j.Checkpoint != "" && o.Flood.DAGBytes > pullCap(o.Disk) {
			t.Errorf("the job keeps checkpoint %s of %d bytes, more than one pull of it may take (%d)", j.Checkpoint, o.Flood.DAGBytes, pullCap(o.Disk))
		}
	})
	t.Run("escapes", func(t *testing.T) {
		if bytes.ContainsAny([]byte(out.Printed), "\x1b\x07") {
			t.Fatalf("e31 nodes printed the rogue's escapes: %q", out.Printed)
		}
	})
	checkRefusalsNamed(t, c, out, 0)
	checkHonest(t, out)
}

// TestRogueSubmitters: rogue submitters attack honest providers, and a
// rogue provider an honest gang. A submitter that never countersigns a
// receipt has its lease stopped after a few refusals in a row, is struck
// off by the provider (GET /v1/peers says so) and gets no proposal for its
// next job. A provider that takes a gang's part and never signs the gang
// lease is avoided for the gang, which runs without it. A submitter that
// never sends its gang's lease has every part given up by its provider,
// the held time on a record that blames it.
func TestRogueSubmitters(t *testing.T) {
	c := start(t, benchrogue.SubmitterNet())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := benchrogue.SubmitterAttacks(ctx, c, rogueOptions(t))
	logOutcome(t, out)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("never countersigns", func(t *testing.T) {
		r := attack(t, out, rogue.AttackNoCountersign)
		// Its job runs 30s: a lease stopped for its receipts ends well
		// before.
		if r.Held >= 30*time.Second {
			t.Errorf("the provider held the lease %s, the whole run: it never stopped it", r.Held)
		}
		rogueID := out.Rogues[rogue.AttackNoCountersign]
		if _, struck := benchrogue.Struck([]byte(out.Strikes), rogueID); !struck {
			t.Errorf("the provider's GET /v1/peers strikes nothing of %s: %s", rogueID, out.Strikes)
		}
		s, ok := r.Step("proposals for its next job")
		if !ok || s.Count != 0 {
			t.Errorf("its next job: %+v, want no proposal", s)
		}
	})
	t.Run("gang squat", func(t *testing.T) {
		squatter := out.Rogues[rogue.AttackGangSquat]
		var gang api.Job
		for _, j := range out.Honest {
			if j.ID == out.Jobs[rogue.AttackGangSquat] {
				gang = j
			}
		}
		// The avoid is the squatted part's: in the requeue that every
		// peer's Match reads, and in the part's status.
		part, err := c.Client(0).Job(ctx, market.TaskID(gang.ID, 0))
		if err != nil {
			t.Fatal(err)
		}
		s, ok := attack(t, out, rogue.AttackGangSquat).Step("named in the requeue's avoid list")
		if (!ok || s.Count == 0) && !slices.Contains(part.Avoid, squatter) {
			t.Errorf("no avoid list names the squatter %s: the requeue's says %q, part 0's is %v", squatter, s.Err, part.Avoid)
		}
		for _, p := range gang.Parts {
			if p.Provider == squatter {
				t.Errorf("part %d of the gang ran on the squatter", p.Rank)
			}
		}
	})
	t.Run("gang lease withheld", func(t *testing.T) {
		r := attack(t, out, rogue.AttackGangWithheld)
		given := 0
		for _, s := range r.Steps {
			if s.What != "part given up" {
				continue
			}
			given++
			if !strings.Contains(s.Err, "/"+string(ledger.AttributionSubmitter)+" ") {
				t.Errorf("a part given up is blamed: %s, want the submitter", s.Err)
			}
		}
		if given < 2 || given > 4 {
			t.Errorf("%d parts given up, want both in one round or two: %s", given, r.Summary())
		}
		// A round whose parts were all leased after two lapses in a row
		// means a provider took a part from a submitter it struck off.
		rounds := 0
		for _, s := range r.Steps {
			if s.What == "parts leased" && s.Count == 2 {
				rounds++
			}
		}
		if rounds > 2 {
			t.Errorf("the gang was leased in %d rounds; after two lapses its submitter is struck: %s", rounds, r.Summary())
		}
	})
	for i := range c.Nodes {
		checkRefusalsNamed(t, c, out, i)
	}
	checkHonest(t, out)
}

// TestStruckReadsPeers: Struck finds a strike whether the peer list
// carries it on the peer's entry or in a list of its own, and nothing
// where no field speaks of strikes.
func TestStruckReadsPeers(t *testing.T) {
	const id = "12D3KooWRogue"
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{fmt.Sprintf(`[{"peer_id":%q,"path":"direct","strike":{"count":1,"until":"2026-12-07T10:00:00Z"}}]`, id), true},
		{fmt.Sprintf(`{"peers":[],"strikes":[{"submitter":%q,"count":1}]}`, id), true},
		{fmt.Sprintf(`[{"peer_id":%q,"path":"direct","struck":false}]`, id), false},
		{fmt.Sprintf(`[{"peer_id":%q,"path":"direct"}]`, id), false},
		{`[{"peer_id":"other","strike":{"count":1}}]`, false},
	} {
		if _, got := benchrogue.Struck([]byte(c.raw), id); got != c.want {
			t.Errorf("Struck(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}

// relayAllowance is what a relay that carries data lets a circuit carry
// each way between members with no live lease together: a limited
// circuit's (p2p.RelayLimits.Data's default).
const relayAllowance = 128 << 10

// relayCharge is the most a data circuit may carry past a spent byte
// budget: the relay charges its budgets every 64 KiB a circuit carries,
// twice that for room.
const relayCharge = 2 * 64 << 10

// TestRogueRelay: a daemon serving as a relay that carries data (e31d
// --relay-service --relay-data) serves the network only. A stranger, a
// host that never published on the network's topics, gets no slot and no
// circuit to a member. A member gets a slot, and its circuit to another
// member with whom it holds no lease carries no more than a limited
// circuit's allowance before the relay cuts it; once the two hold a lease,
// their circuit carries their data until the byte budget a peer is spent,
// and no further. The relay counts each refusal and cut in its
// e31_relay_* series and names it in its log.
func TestRogueRelay(t *testing.T) {
	o := rogueOptions(t)
	o.RelayBudget, o.RelayPush = benchrogue.DefaultRelayBudget, 1<<20
	c := start(t, benchrogue.RelayNet(o.RelayBudget))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := benchrogue.RelayAttacks(ctx, c, o)
	logOutcome(t, out)
	if err != nil {
		t.Fatal(err)
	}
	r := attack(t, out, rogue.AttackRelay)
	series := func(name, label, value string) float64 {
		return out.Relay[fmt.Sprintf("%s{%s=%q}", name, label, value)]
	}

	t.Run("stranger", func(t *testing.T) {
		wantRefused(t, r, rogue.StepStrangerSlot, "PERMISSION_DENIED")
		wantRefused(t, r, rogue.StepStrangerCircuit, "PERMISSION_DENIED")
		if n := series("e31_relay_reservations_refused_total", "reason", "stranger"); n < 1 {
			t.Errorf("the relay counted %v slots refused to strangers: %v", n, out.Relay)
		}
		if n := series("e31_relay_circuits_refused_total", "reason", "stranger"); n < 1 {
			t.Errorf("the relay counted %v circuits refused to strangers: %v", n, out.Relay)
		}
	})
	t.Run("no lease", func(t *testing.T) {
		wantAnswer(t, r, rogue.StepMemberSlot, rogue.Accepted)
		wantAnswer(t, r, rogue.StepUnleased, rogue.Accepted)
		wantAnswer(t, r, rogue.StepUnleasedPush, rogue.Cut)
		if r.Bytes > relayAllowance {
			t.Errorf("%d bytes went between members with no lease, over the %d a limited circuit carries", r.Bytes, relayAllowance)
		}
		if n := series("e31_relay_circuits_ended_total", "reason", "allowance"); n < 1 {
			t.Errorf("the relay counted %v circuits cut past their allowance: %v", n, out.Relay)
		}
	})
	t.Run("budget", func(t *testing.T) {
		wantAnswer(t, r, rogue.StepLease, rogue.Countersigned)
		wantAnswer(t, r, rogue.StepLeasePush, rogue.Cut)
		s, _ := r.Step(rogue.StepLeasePush)
		if int64(s.Count) > o.RelayBudget+relayCharge {
			t.Errorf("%d bytes went under the lease, past the budget of %d a peer", s.Count, o.RelayBudget)
		}
		// Over the allowance, the relay carried them as the lease's data:
		// it must have counted the budget that ended them.
		if s.Count > relayAllowance && (series("e31_relay_budgets_spent_total", "budget", "peer") < 1 ||
			series("e31_relay_circuits_ended_total", "reason", "budget") < 1) {
			t.Errorf("%d bytes went under the lease and were cut, but the relay counted no budget spent: %v", s.Count, out.Relay)
		}
	})
	log, err := os.ReadFile(filepath.Join(c.Nodes[0].Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, words := range [][]string{
		{"relay slot refused", "reason=stranger"},
		{"relay circuit refused", "reason=stranger"},
		{"relay cut a circuit", "reason=allowance"},
	} {
		if !benchrogue.LogNames(string(log), words...) {
			t.Errorf("the relay's log has no line with %q", words)
		}
	}
}

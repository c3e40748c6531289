package speed

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench"
)

func TestParseTraces(t *testing.T) {
	f, err := os.Open("testdata/traces.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := ParseTraces(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 8 {
		t.Fatalf("%d samples, want 8", len(samples))
	}
	first := samples[0]
	if first.Value != 10*time.Millisecond || len(first.Stack) != 7 || first.Stack[0] != "crypto/internal/fips140/edwards25519/field.feMul" || first.Stack[2] != "crypto/ed25519.Sign" {
		t.Fatalf("first sample %+v", first)
	}
	if samples[1].Value != 1200*time.Millisecond || samples[4].Value != 200*time.Millisecond {
		t.Fatalf("values %v and %v, want 1.2s and 200ms (after a label line)", samples[1].Value, samples[4].Value)
	}
}

// Every sample goes to the leaf-most frame a phase claims: signing inside
// gossip is signing, Badger under the ledger is Badger, allocation in Match
// is Match, a fork under the runner is the sandbox.
func TestAttribute(t *testing.T) {
	f, err := os.Open("testdata/traces.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := ParseTraces(f)
	if err != nil {
		t.Fatal(err)
	}
	got := Attribute(samples)
	want := []PhaseCost{
		{PhaseBadger, 1200 * time.Millisecond},
		{PhaseOther, 500 * time.Millisecond},
		{PhaseMatch, 200 * time.Millisecond},
		{PhaseSandbox, 100 * time.Millisecond},
		{PhaseRuntime, 30 * time.Millisecond},
		{PhaseStreams, 20 * time.Millisecond},
		{PhaseSigning, 10 * time.Millisecond},
		{PhaseSubmit, 10 * time.Millisecond},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	var sum time.Duration
	for _, c := range got {
		sum += c.CPU
	}
	if sum != 2070*time.Millisecond {
		t.Fatalf("attributed %v in all, want every sample's 2.07s", sum)
	}
}

func TestPhaseOfLongestPrefix(t *testing.T) {
	rules := phaseRules()
	for stack, want := range map[string]string{
		"github.com/libp2p/go-libp2p-pubsub.(*PubSub).handleIncomingRPC": PhaseGossip,
		"github.com/libp2p/go-libp2p/core/crypto.UnmarshalPublicKey":     PhaseSigning,
		"github.com/libp2p/go-libp2p/p2p/net/swarm.(*Conn).start":        PhaseStreams,
		"github.com/e31network/e31/node/state.(*Store).Put":              PhaseBadger,
		"github.com/e31network/e31/node.(*Node).run":                     PhaseDaemon,
		"github.com/e31network/e31/node/submitter.(*Submitter).Submit":   PhaseSubmit,
		"github.com/e31network/e31/exec.(*Runner).Run":                   PhaseSandbox,
		"net/http/pprof.Profile":                                         PhaseMetrics,
		"runtime.schedule":                                               PhaseRuntime,
	} {
		if got := phaseOf(rules, []string{stack}); got != want {
			t.Errorf("%s: %q, want %q", stack, got, want)
		}
	}
}

func TestSandboxCeiling(t *testing.T) {
	r := ProfileReport{
		RuncMs: 38,
		Phases: []PhaseCost{{Phase: PhaseOther, CPU: 30 * time.Millisecond}, {Phase: PhaseSandbox, CPU: 2 * time.Millisecond}},
	}
	if r.sandboxCeiling(nil) != nil {
		t.Fatal("a ceiling without the bare limit")
	}
	f := r.sandboxCeiling(&SandboxLimit{Cores: 2, BareCPUMs: 25, JobsPerS: 80})
	if f == nil {
		t.Fatal("no ceiling")
	}
	// 2 cores / (38 + 2) CPU-ms a job: 50 jobs/s, 0.625 of 80; the
	// other phase is not the sandbox's.
	if f.Value != 50 || f.Ratio == nil || *f.Ratio != 0.625 {
		t.Fatalf("ceiling %v jobs/s, ratio %v; want 50 and 0.625", f.Value, f.Ratio)
	}
	all := r.Figures(&SandboxLimit{Cores: 2, BareCPUMs: 25, JobsPerS: 80})
	if !slices.ContainsFunc(all, func(g bench.Figure) bool { return g.Name == f.Name }) {
		t.Fatal("Figures leaves the ceiling out")
	}
}

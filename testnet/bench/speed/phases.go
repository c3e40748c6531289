package speed

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Sample is one stack of a CPU profile and the CPU time spent in it.
type Sample struct {
	Value time.Duration
	// Stack is the function names, leaf first.
	Stack []string
}

// The phases a job's CPU is split into. The names are those of issue 12's
// list; Runtime and Other take what no frame of a stack claims.
const (
	PhaseSubmit   = "submit/API (apiserver, submitter)"
	PhaseSigning  = "signing (ed25519)"
	PhaseGossip   = "gossip (pubsub)"
	PhaseMatch    = "Match (market)"
	PhaseView     = "view (offers, leases)"
	PhaseLease    = "lease/provider"
	PhaseDaemon   = "daemon loops (node)"
	PhaseBadger   = "Badger and state stores"
	PhaseSandbox  = "sandbox (exec, in e31d)"
	PhaseContent  = "content import (content, boxo)"
	PhaseReceipts = "receipts (ledger)"
	PhaseStreams  = "libp2p streams and transports"
	PhaseMetrics  = "metrics and profiling"
	PhaseRuntime  = "Go runtime (GC, scheduler)"
	PhaseOther    = "other"
)

// phaseRule claims the frames whose function name starts with prefix.
type phaseRule struct {
	prefix, phase string
}

// phaseRules lists the claims. A frame goes to the longest prefix that
// matches it, so go-libp2p-pubsub is gossip although github.com/libp2p/ is
// streams, and libp2p's crypto is signing.
func phaseRules() []phaseRule {
	const e31 = "github.com/e31network/e31/"
	return []phaseRule{
		{e31 + "node/apiserver", PhaseSubmit},
		{e31 + "node/api.", PhaseSubmit},
		{e31 + "node/submitter", PhaseSubmit},
		{"net/http.", PhaseSubmit},
		{"crypto/ed25519", PhaseSigning},
		{"crypto/internal/fips140/ed25519", PhaseSigning},
		{"crypto/internal/fips140/edwards25519", PhaseSigning},
		{"filippo.io/edwards25519", PhaseSigning},
		{"github.com/oasisprotocol/curve25519-voi", PhaseSigning},
		{"github.com/libp2p/go-libp2p/core/crypto", PhaseSigning},
		{"github.com/libp2p/go-libp2p/core/record", PhaseSigning},
		{"github.com/libp2p/go-libp2p-pubsub", PhaseGossip},
		{e31 + "market", PhaseMatch},
		{e31 + "node/view", PhaseView},
		{e31 + "node/provider", PhaseLease},
		{e31 + "node/task", PhaseLease},
		{e31 + "node.", PhaseDaemon},
		{e31 + "node/state", PhaseBadger},
		{"github.com/dgraph-io/", PhaseBadger},
		{e31 + "exec", PhaseSandbox},
		{"os/exec.", PhaseSandbox},
		{"syscall.forkExec", PhaseSandbox},
		{"os.StartProcess", PhaseSandbox},
		{e31 + "content", PhaseContent},
		{e31 + "node/images", PhaseContent},
		{"github.com/ipfs/", PhaseContent},
		{"github.com/ipld/", PhaseContent},
		{e31 + "ledger", PhaseReceipts},
		{e31 + "p2p", PhaseStreams},
		{e31 + "node/wire", PhaseStreams},
		{"github.com/libp2p/", PhaseStreams},
		{"github.com/multiformats/", PhaseStreams},
		{"github.com/quic-go/", PhaseStreams},
		{"github.com/flynn/noise", PhaseStreams},
		{"crypto/tls.", PhaseStreams},
		{"github.com/prometheus/", PhaseMetrics},
		{"runtime/pprof.", PhaseMetrics},
		{"net/http/pprof.", PhaseMetrics},
	}
}

// phaseOf names the phase of a stack: that of the leaf-most frame some
// rule claims, so CPU spent in the runtime, syscalls or encoding on behalf
// of a package is that package's; else the Go runtime's when the stack is
// the runtime's own (GC workers, the scheduler), else other.
func phaseOf(rules []phaseRule, stack []string) string {
	for _, fn := range stack {
		best := -1
		for i, r := range rules {
			if strings.HasPrefix(fn, r.prefix) && (best < 0 || len(r.prefix) > len(rules[best].prefix)) {
				best = i
			}
		}
		if best >= 0 {
			return rules[best].phase
		}
	}
	for _, fn := range stack {
		if strings.HasPrefix(fn, "runtime.") {
			return PhaseRuntime
		}
	}
	return PhaseOther
}

// PhaseCost is the CPU a phase took.
type PhaseCost struct {
	Phase string        `json:"phase"`
	CPU   time.Duration `json:"cpu_ns"`
}

// Attribute sums the samples by phase, largest first (ties by name).
func Attribute(samples []Sample) []PhaseCost {
	rules := phaseRules()
	sum := map[string]time.Duration{}
	for _, s := range samples {
		sum[phaseOf(rules, s.Stack)] += s.Value
	}
	out := make([]PhaseCost, 0, len(sum))
	for p, d := range sum {
		out = append(out, PhaseCost{p, d})
	}
	slices.SortFunc(out, func(a, b PhaseCost) int {
		if a.CPU != b.CPU {
			if a.CPU > b.CPU {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Phase, b.Phase)
	})
	return out
}

// ParseTraces reads the output of `go tool pprof -traces` of a CPU
// profile: blocks separated by "-----------+----" lines, each a value
// ("10ms", "1.20s") before the leaf frame and one frame a line after it,
// with label lines ("key:  value") before the frames.
func ParseTraces(r io.Reader) ([]Sample, error) {
	var out []Sample
	var cur *Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			cur = nil
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if cur == nil {
			if len(f) < 2 {
				continue // header lines: "File: e31d", "Type: cpu", ...
			}
			d, err := time.ParseDuration(f[0])
			if err != nil {
				continue // a header line or a label line
			}
			out = append(out, Sample{Value: d, Stack: []string{frameName(f[1:])}})
			cur = &out[len(out)-1]
			continue
		}
		cur.Stack = append(cur.Stack, frameName(f))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	return out, nil
}

// frameName is the function of a trace line, without the " (inline)" mark.
func frameName(f []string) string {
	return f[0]
}

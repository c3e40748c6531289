package rogue

import (
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/byzantine/rogue"
)

// Options shape the attacks; zero values take the defaults noted.
type Options struct {
	// E31 is the e31 command: the escape attack reads `e31 nodes` on the
	// victim as its user would. Empty: that attack is not made.
	E31 string
	// Dir holds the rogues' content stores; empty keeps them in memory.
	Dir string
	// Flood shapes the checkpoint flood (rogue.FloodOptions' defaults),
	// whose job declares request.disk Disk; default 64 MiB.
	Flood rogue.FloodOptions
	Disk  market.Size
	// InputBytes is the size of the queued job's input the staging attack
	// goes after; default 4 MiB.
	InputBytes int
	// SquatRounds bounds how often the gang squatter takes its part;
	// default 3. GangRounds how often the rogue submitter's gang is
	// leased and left to lapse; default 1.
	SquatRounds, GangRounds int
	// GangWithin bounds each of those rounds' waits (rogue.WithholdOptions);
	// default SubmitterNet's gang wait and a minute.
	GangWithin time.Duration
	// RelayPush is how many bytes the relay abuse pushes between two
	// members with no lease; default 4 MiB. RelayBudget is the relay's
	// byte budget a peer (RelayNet), which the lease's circuit is pushed
	// past; default DefaultRelayBudget.
	RelayPush, RelayBudget int64
	// Unbounded has the rogues propose terms without the held-time rule,
	// for daemons from before it (rogue.Config.Unbounded).
	Unbounded bool
	// Networks names the networks Measure runs (NetProviders,
	// NetSubmitters, NetRelay); none: all.
	Networks []string
	// Log receives progress lines; nil: none.
	Log func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	bench.Default(&o.Disk, 64*market.MiB)
	bench.Default(&o.InputBytes, 4<<20)
	bench.Default(&o.SquatRounds, 3)
	bench.Default(&o.GangRounds, 1)
	bench.Default(&o.GangWithin, gangStartWithin+time.Minute)
	bench.Default(&o.RelayPush, 4<<20)
	bench.Default(&o.RelayBudget, DefaultRelayBudget)
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// Outcome is what one network's attacks did, and what the victims said.
type Outcome struct {
	// Results are the attacks' results, in the order of issue 51.
	Results []rogue.Result `json:"results"`
	// Errors names, by attack, why it could not be carried out: such an
	// attack's result proves nothing.
	Errors map[string]string `json:"errors,omitempty"`
	// Jobs names, by attack, the honest job it went after or the job its
	// rogue declared; Rogues the rogue's peer ID.
	Jobs   map[string]string `json:"jobs"`
	Rogues map[string]string `json:"rogues"`
	// Victims names, by attack, the node the attack was on.
	Victims map[string]int `json:"victims"`
	// Honest are the honest jobs run beside the attacks, as they ended
	// (or stood at the end).
	Honest []api.Job `json:"honest"`
	// Refused is, by node name, e31_refused_total at the end, keyed
	// "PROTO CODE".
	Refused map[string]map[string]float64 `json:"refused"`
	// Returned is the bytes the victim of the checkpoint flood fetched
	// over it (e31_bytes_returned_total).
	Returned float64 `json:"returned,omitempty"`
	// Printed is what `e31 nodes` printed on the escape attack's victim.
	Printed string `json:"printed,omitempty"`
	// Relay is, on the relay abuse's relay, its e31_relay_* series at
	// the end, by series, those above 0.
	Relay map[string]float64 `json:"relay,omitempty"`
	// Strikes is, for the submitter that never countersigns, GET
	// /v1/peers on the provider that took its job.
	Strikes string `json:"strikes,omitempty"`
}

func newOutcome() Outcome {
	return Outcome{Errors: map[string]string{}, Jobs: map[string]string{}, Rogues: map[string]string{}, Victims: map[string]int{}, Refused: map[string]map[string]float64{}}
}

// Result is the result of an attack, and whether it was made.
func (o Outcome) Result(attack string) (rogue.Result, bool) {
	for _, r := range o.Results {
		if r.Attack == attack {
			return r, true
		}
	}
	return rogue.Result{}, false
}

// add keeps an attack's result, or why it could not be made.
func (o *Outcome) add(res rogue.Result, err error) {
	if err != nil {
		o.Errors[res.Attack] = err.Error()
	}
	o.Results = append(o.Results, res)
}

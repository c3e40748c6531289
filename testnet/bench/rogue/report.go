package rogue

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
)

// Row is one attack and what happened.
type Row struct {
	Attack string `json:"attack"`
	What   string `json:"what"`
}

// Report is every attack's row, in the order of issue 51, and the
// networks' outcomes in full.
type Report struct {
	Rows       []Row   `json:"rows"`
	Providers  Outcome `json:"providers"`
	Submitters Outcome `json:"submitters"`
	Relay      Outcome `json:"relay"`
}

// The networks Measure runs, by name (Options.Networks).
const (
	NetProviders  = "providers"
	NetSubmitters = "submitters"
	NetRelay      = "relay"
)

// elsewhere are the attacks of issue 51 that other harnesses play, with
// where.
var elsewhere = []Row{
	{"view flood from 20 identities", "not played here: testnet/byzantine/flood"},
}

// order is the attacks in the order of issue 51, with those played
// elsewhere where the issue has them.
var order = []string{
	rogue.AttackBackdated, rogue.AttackNoOffer, rogue.AttackNotAssigned, rogue.AttackPastLimit, rogue.AttackAfterFinal,
	rogue.AttackStage, rogue.AttackFalseCompleted, rogue.AttackFalseCheckpoint, rogue.AttackCheckpointFlood,
	rogue.AttackNoCountersign, rogue.AttackGangSquat, rogue.AttackGangWithheld, elsewhere[0].Attack, rogue.AttackRelay,
	rogue.AttackEscapes,
}

// rows makes the table's rows from both outcomes.
func rows(outs ...Outcome) []Row {
	var out []Row
	for _, a := range order {
		if i := slices.IndexFunc(elsewhere, func(r Row) bool { return r.Attack == a }); i >= 0 {
			out = append(out, elsewhere[i])
			continue
		}
		for _, o := range outs {
			res, ok := o.Result(a)
			if !ok {
				continue
			}
			what := res.Summary()
			if e := o.Errors[a]; e != "" {
				what = "NOT CARRIED OUT: " + e + "; " + what
			}
			out = append(out, Row{Attack: a, What: what})
		}
	}
	return out
}

// Measure runs the networks of e, one after the other (those
// o.Networks names, or all), and plays every attack on them.
func Measure(ctx context.Context, e bench.Env, o Options) (Report, error) {
	var rep Report
	if o.E31 == "" {
		o.E31 = e.Bin.E31
	}
	if o.Log == nil {
		o.Log = e.Logf
	}
	run := func(name string, opts cluster.Options, attacks func(context.Context, *cluster.Cluster, Options) (Outcome, error)) (Outcome, error) {
		opts.Dir, opts.Bin = filepath.Join(e.Dir, name), e.Bin
		e.Logf("rogue: starting the %s network", name)
		c, err := bench.StartNetwork(ctx, opts)
		if err != nil {
			return Outcome{}, err
		}
		defer c.Stop()
		oo := o
		oo.Dir = filepath.Join(e.Dir, name+"-rogues")
		out, err := attacks(ctx, c, oo)
		if p := c.Panics(); len(p) > 0 && err == nil {
			err = fmt.Errorf("a daemon panicked:\n%s", strings.Join(p, "\n"))
		}
		return out, err
	}
	wanted := func(name string) bool { return len(o.Networks) == 0 || slices.Contains(o.Networks, name) }
	var err error
	if wanted(NetProviders) {
		if rep.Providers, err = run(NetProviders, ProviderNet(), ProviderAttacks); err != nil {
			return rep, fmt.Errorf("rogue providers: %w", err)
		}
	}
	if wanted(NetSubmitters) {
		if rep.Submitters, err = run(NetSubmitters, SubmitterNet(), SubmitterAttacks); err != nil {
			return rep, fmt.Errorf("rogue submitters: %w", err)
		}
	}
	if wanted(NetRelay) {
		if rep.Relay, err = run(NetRelay, RelayNet(o.withDefaults().RelayBudget), RelayAttacks); err != nil {
			return rep, fmt.Errorf("rogue relay: %w", err)
		}
	}
	rep.Rows = rows(rep.Providers, rep.Submitters, rep.Relay)
	return rep, nil
}

// Run builds e31d and e31 into dir/bin, unless bin names them already
// (a build of another commit, to measure it), and runs Measure in dir.
func Run(ctx context.Context, dir string, bin cluster.Binaries, log func(format string, args ...any), o Options) (Report, error) {
	e := bench.Env{Dir: dir, Bin: bin, Log: log}
	if bin.E31d == "" {
		var err error
		if e, err = bench.BuildEnv(ctx, dir, log); err != nil {
			return Report{}, err
		}
	}
	return Measure(ctx, e, o)
}

// WriteMarkdown writes the table "attack | what happened", then the
// honest jobs and what the victims counted.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| attack | what happened |\n| --- | --- |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row.Attack, strings.ReplaceAll(row.What, "|", "\\|"))
	}
	for _, o := range []struct {
		name string
		out  Outcome
	}{{NetProviders, r.Providers}, {NetSubmitters, r.Submitters}, {NetRelay, r.Relay}} {
		if len(o.out.Results) == 0 {
			continue // not run
		}
		fmt.Fprintf(&b, "\n%s network:", o.name)
		if len(o.out.Honest) > 0 {
			b.WriteString(" honest jobs")
		}
		for _, j := range o.out.Honest {
			fmt.Fprintf(&b, " %s %s/%s;", j.Name, j.State, j.Outcome)
		}
		b.WriteString("\n")
		names := slices.Sorted(maps.Keys(o.out.Refused))
		for _, n := range names {
			codes := o.out.Refused[n]
			if len(codes) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s e31_refused_total:", n)
			for _, k := range slices.Sorted(maps.Keys(codes)) {
				fmt.Fprintf(&b, " %s=%v", k, codes[k])
			}
			b.WriteString("\n")
		}
		for _, k := range slices.Sorted(maps.Keys(o.out.Relay)) {
			fmt.Fprintf(&b, "relay %s %v\n", k, o.out.Relay[k])
		}
	}
	fmt.Fprintf(&b, "\nmeasured %s\n", time.Now().UTC().Format(time.RFC3339))
	_, err := io.WriteString(w, b.String())
	return err
}

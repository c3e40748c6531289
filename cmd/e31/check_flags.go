package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/e31network/e31/market"
)

// checkOptions are the flags that ask for a job's results to be checked:
// in either form, over a declaration's verify section.
type checkOptions struct {
	replicas     int
	spot         string
	minRecord    int
	comparePaths []string
}

func (o *checkOptions) flags(f *pflag.FlagSet) {
	f.IntVar(&o.replicas, "replicas", 0, "run the job on N (2 or 3) distinct providers and compare their outputs; with 2 that disagree a third runs and the majority wins (verify.replicas)")
	f.StringVar(&o.spot, "spot", "", "SHARE, such as 0.05 or 5%: run again this share of an array's tasks on other providers, drawn as each completes, and compare (verify.spot)")
	f.IntVar(&o.minRecord, "min-record", 0, "place the job only on providers this node has seen complete at least N leases (verify.min_record)")
	f.StringArrayVar(&o.comparePaths, "compare-path", nil, "PATH inside the output folder: compare only these files of the replicas' outputs, for outputs that carry timestamps; repeatable (verify.compare.paths)")
}

// apply sets the flags given in d's verify section, then checks the
// declaration again: a flag may make it invalid (--replicas on an array).
func (o checkOptions) apply(f *pflag.FlagSet, d *market.Declaration) error {
	if !f.Changed("replicas") && !f.Changed("spot") && !f.Changed("min-record") && !f.Changed("compare-path") {
		return nil
	}
	v := market.Verify{}
	if d.Verify != nil {
		v = *d.Verify
	}
	if f.Changed("replicas") {
		v.Replicas = o.replicas
	}
	if f.Changed("spot") {
		s, err := market.ParseShare(o.spot)
		if err != nil {
			return fmt.Errorf("--spot: %w", err)
		}
		v.Spot = s
	}
	if f.Changed("min-record") {
		v.MinRecord = o.minRecord
	}
	if f.Changed("compare-path") {
		v.Compare = &market.Compare{Paths: o.comparePaths}
	}
	d.Verify = &v
	if err := d.Validate(); err != nil {
		return fmt.Errorf("the job is not valid:\n%w", err)
	}
	return nil
}

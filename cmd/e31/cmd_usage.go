package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type usageOptions struct {
	since string
	peer  string
	job   string
	tasks bool
	json  bool
}

func newUsageCommand(g *globalOptions) *cobra.Command {
	var o usageOptions
	cmd := &cobra.Command{
		Use:   "usage [--since DURATION|RFC3339] [--peer PEER] [--job JOB [--tasks]] [--json]",
		Short: "GPU-hours and CPU-hours held with each counterpart and on each GPU model, and what is owed",
		Long: `usage sums the GPU-hours (GPUs × time held) of the leases in this node's
ledger, per counterpart and per GPU model, split by how each lease ended and
who caused it, and beside them the CPU-hours and the GiB-hours of memory and
disk the leases held (where their receipts say: a job without GPUs holds
these alone), and marks the part the default policy makes owed: what the job
or its submitter caused is owed, what the provider or the network caused is
not, and queued time is never owed (nothing is held). Hours that rest on one
party's word (a one-sided record, or this node's version of a dispute) are
marked. This node's own jobs on its own GPUs are counted under its own ID,
marked "own jobs", and owed by no one. --since takes a duration back from
now (24h) or an RFC 3339 time.

--job counts one job's leases, by the ID submit printed (or a prefix): every
attempt's (a resumption, a retry, a run again after a preemption runs under
an ID of its own), and for an array, a gang or a pipeline's stage every
task's and each of their attempts'. It prints the job's total first: held,
owed and not owed GPU-hours, the same sum that status and "receipts --job"
show and that "verify" of the job's export checks. --tasks, with --job,
prints one row per task instead, as sacct -j does: its index, GPU-hours held,
owed and not owed over all its attempts, how many attempts it took and how
its last one ended.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUsage(cmd.Context(), o, g, time.Now())
		},
	}
	cmd.Flags().StringVar(&o.since, "since", "", "count only time held since then: a duration back from now (24h) or an RFC 3339 time")
	cmd.Flags().StringVar(&o.peer, "peer", "", "only leases with this counterpart (peer ID)")
	cmd.Flags().StringVar(&o.job, "job", "", "only this job's leases; for an array, all of its tasks' (an ID or a prefix)")
	cmd.Flags().BoolVar(&o.tasks, "tasks", false, "with --job: one row per task (index, GPU-hours held, owed and not owed, attempts, how its last attempt ended)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the report as JSON (policy, rows, by_peer, by_model, total; gpu_hours, cpu_hours, memory_gib_hours, disk_gib_hours and what is owed of each); with --tasks, {id, tasks, total}, each with index, attempts, leases, state, outcome, gpu_hours, owed_gpu_hours, not_owed_gpu_hours")
	return cmd
}

func runUsage(ctx context.Context, o usageOptions, g *globalOptions, now time.Time) error {
	since, err := api.ParseSince(o.since, now)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	if o.tasks {
		if o.job == "" {
			return errors.New("--tasks lists the tasks of one job: e31 usage --job ARRAY --tasks")
		}
		if o.since != "" || o.peer != "" {
			return errors.New("--tasks sums whole tasks: it takes neither --since nor --peer")
		}
	}
	raw, err := g.client().Usage(ctx, api.UsageQuery{Since: since, Peer: o.peer, Job: o.job, Tasks: o.tasks})
	if err != nil {
		return err
	}
	if o.tasks {
		var ju api.JobUsage
		if err := json.Unmarshal(raw, &ju); err != nil {
			return fmt.Errorf("decode task usage: %w", err)
		}
		if o.json {
			return g.printJSON(ju)
		}
		return printTaskUsage(g.stdout, ju)
	}
	var rep ledger.UsageReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("decode usage report: %w", err)
	}
	if o.json {
		return g.printJSON(rep)
	}
	if !since.IsZero() {
		fmt.Fprintf(g.stdout, "since %s\n\n", since.Local().Format(time.RFC3339))
	}
	if o.job != "" {
		fmt.Fprintf(g.stdout, "job %s: %d leases; %s%s\n\n", o.job, rep.Total.Leases, heldOwed(rep.Total.GPUHours, rep.Total.OwedGPUHours), lostShare(rep.Total.LostGPUHours))
	}
	return printUsage(g.stdout, rep)
}

// oneSidedMark flags hours that rest on one party's word.
const oneSidedMark = "*"

// ownMark names, in place of a role, this node's own jobs on its GPUs.
const ownMark = "own jobs"

// lostMark names the leases whose replicas lost a verification.
const lostMark = "lost verification"

func printUsage(w io.Writer, rep ledger.UsageReport) error {
	if len(rep.Rows) == 0 {
		fmt.Fprintln(w, "no held time on record")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTERPART\tTHEIR ROLE\tGPU-HOURS\tOWED\tONE-SIDED\tCPU-HOURS\tOWED\tMEMORY GiB-H\tDISK GiB-H")
		own := false
		for _, t := range rep.ByPeer {
			role := t.Role
			if role == ledger.RoleSelf {
				role, own = ownMark, true
			}
			writef(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Peer, role, hours(t.GPUHours), hours(t.Owed), oneSided(t.OneSided),
				hours(t.CPUHours), hours(t.OwedCPUHours), hours(t.MemoryGiBHours), hours(t.DiskGiBHours))
		}
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "GPU MODEL\t\tGPU-HOURS\tOWED\tONE-SIDED\tCPU-HOURS\tOWED\tMEMORY GiB-H\tDISK GiB-H")
		for _, t := range rep.ByModel {
			writef(tw, "%s\t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(t.GPUModel), hours(t.GPUHours), hours(t.Owed), oneSided(t.OneSided),
				hours(t.CPUHours), hours(t.OwedCPUHours), hours(t.MemoryGiBHours), hours(t.DiskGiBHours))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTERPART\tGPU MODEL\tOUTCOME\tATTRIBUTION\tRECORD\tLEASES\tGPU-HOURS\tOWED\tCPU-HOURS")
		for _, r := range rep.Rows {
			mark := ""
			if r.Basis == ledger.SettlementOneSided || r.Basis == ledger.SettlementDisputed {
				mark = oneSidedMark
			}
			owed := "no"
			switch {
			case r.Owed && r.OwedGPUHours < r.GPUHours:
				owed = "to checkpoint: " + hours(r.OwedGPUHours)
			case r.Owed:
				owed = "yes"
			}
			if r.Role == ledger.RoleSelf {
				owed = "no (" + ownMark + ")"
			}
			if r.LostVerification {
				owed = "no (" + lostMark + ")"
			}
			writef(tw, "%s\t%s\t%s\t%s\t%s%s\t%d\t%s\t%s\t%s\n", r.Peer, orDash(r.GPUModel), orDash(r.Outcome), orDash(r.Attribution),
				r.Basis, mark, r.Leases, hours(r.GPUHours), owed, hours(r.CPUHours))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s one-sided or disputed: the hours rest on one party's signed word (this node's).\n", oneSidedMark)
		fmt.Fprintln(w, "A counterpart in the provider role is owed by this node; one in the submitter role owes it.")
		fmt.Fprintln(w, "CPU-hours and GiB-hours count the leases whose receipts name what they held beside GPUs.")
		if own {
			fmt.Fprintf(w, "%s: this node's own jobs on its own GPUs, held but owed by no one.\n", ownMark)
		}
		if lost := rep.Total.LostGPUHours; lost > 0 {
			fmt.Fprintf(w, "not owed, %s: %s GPU-h, held by replicas whose result a verdict found against the majority.\n", lostMark, hours(lost))
		}
	}
	_, err := fmt.Fprintln(w, describePolicy(rep.Policy))
	return err
}

// heldOwed is the line every command prints of a sum of held time: held,
// owed and not owed GPU-hours under the default policy.
func heldOwed(held, owed float64) string {
	return fmt.Sprintf("held %s GPU-h, owed %s, not owed %s", hours(held), hours(owed), hours(held-owed))
}

// lostShare follows heldOwed where some of the hours not owed were held
// by replicas a verdict found against the majority: what failed
// verification cost.
func lostShare(lost float64) string {
	if lost <= 0 {
		return ""
	}
	return fmt.Sprintf(" (of which lost verification %s)", hours(lost))
}

// printTaskUsage prints e31 usage --job ID --tasks: a row a task, as sacct
// -j does, then the job's total.
func printTaskUsage(w io.Writer, ju api.JobUsage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tGPU-HOURS\tOWED\tNOT OWED\tATTEMPTS\tLEASES\tSTATE\tOUTCOME")
	for _, t := range ju.Tasks {
		outcome := orDash(t.Outcome)
		if t.Attribution != "" {
			outcome += " (" + t.Attribution + ")"
		}
		writef(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.Index, hours(t.GPUHours), hours(t.OwedGPUHours), hours(t.NotOwedGPUHours),
			t.Attempts, t.Leases, t.State, outcome)
	}
	tot := ju.Total
	writef(tw, "total\t%s\t%s\t%s\t%d\t%d\t\t\n", hours(tot.GPUHours), hours(tot.OwedGPUHours), hours(tot.NotOwedGPUHours), tot.Attempts, tot.Leases)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\njob %s: %d tasks, %d leases; %s%s\n%s\n", ju.ID, len(ju.Tasks), tot.Leases,
		heldOwed(tot.GPUHours, tot.OwedGPUHours), lostShare(tot.LostGPUHours), describePolicy(ledger.DefaultPolicy()))
	return err
}

func hours(h float64) string { return fmt.Sprintf("%.3f", h) }

func oneSided(h float64) string {
	if h == 0 {
		return "-"
	}
	return hours(h) + oneSidedMark
}

// orDash is s, or "-" where it is empty; s may be any string type
// (ledger.Outcome, ledger.Attribution).
func orDash[S ~string](s S) string {
	if s == "" {
		return "-"
	}
	return string(s)
}

// describePolicy names the policy the report was made under and what it
// owes, a line each.
func describePolicy(p ledger.Policy) string {
	var b strings.Builder
	if reflect.DeepEqual(p, ledger.DefaultPolicy()) {
		b.WriteString("policy: default\n" +
			"  owed:        what the job caused (attribution job: completed, failed, limit) or its submitter (withdrawn)\n" +
			"  not owed:    what the provider or the network caused (provider-lost, output-lost, their failures)\n" +
			"  preempted:   owed up to the last checkpoint the job goes on from, not after it (none without one)\n" +
			"  own GPUs:    a node's own job on its own GPUs is held, owed by no one\n" +
			"  replicas:    a replica whose result a verdict found against the majority is held, not owed (lost verification)\n")
	} else {
		b.WriteString("policy: custom\n  owed:        outcome/attribution")
		for i, c := range p.Owed {
			if i > 0 {
				b.WriteByte(',')
			}
			writef(&b, " %s/%s", c.Outcome, c.Attribution)
		}
		if len(p.OwedToCheckpoint) > 0 {
			b.WriteString("\n  owed up to the last checkpoint:")
			for i, c := range p.OwedToCheckpoint {
				if i > 0 {
					b.WriteByte(',')
				}
				writef(&b, " %s/%s", c.Outcome, c.Attribution)
			}
		}
		b.WriteString("\n  not owed:    every other ending\n")
	}
	if p.OpenOwed {
		b.WriteString("  open leases: owed up to their latest countersigned receipt\n")
	} else {
		b.WriteString("  open leases: not owed until they end\n")
	}
	b.WriteString("  queued time: never owed (no GPU is held)")
	return b.String()
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type leasesOptions struct {
	history bool
	since   string
	max     int
	json    bool
}

func newLeasesCommand(g *globalOptions) *cobra.Command {
	var o leasesOptions
	cmd := &cobra.Command{
		Use:   "leases [--history [--since DURATION|RFC3339] [--max N]] [--json]",
		Short: "What runs on this node's GPUs: the leases it provides, and with --history those that ended",
		Long: `leases lists the leases this node provides now, the oldest first: the job
and its name, the submitter, the GPUs held, when the lease was signed, when
the job's limit ends it at the latest, its phase (held, staging, running,
output, released), its last checkpoint, and what its receipts so far hold and make owed
under the default policy (the sum e31 usage and e31 receipts show; it grows
with each interim receipt, every receipt interval).

--history lists instead the leases this node provided that have ended, from
its ledger, the newest first: the job, the submitter, when the lease was held
from and until, how it ended and who caused it, and the GPU-hours held and
owed. --max bounds how many (default 20, at most 1000); --since keeps those
held since then: a duration back from now (24h) or an RFC 3339 time.

Jobs this node submitted are listed by e31 list; the leases they run under
are in e31 status.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLeases(cmd.Context(), o, g, time.Now())
		},
	}
	cmd.Flags().BoolVar(&o.history, "history", false, "list the leases this node provided that have ended, newest first, from its ledger")
	cmd.Flags().StringVar(&o.since, "since", "", "with --history: only leases held since then, a duration back from now (24h) or an RFC 3339 time")
	cmd.Flags().IntVar(&o.max, "max", 0, fmt.Sprintf("with --history: list at most this many (default %d, at most %d)", api.DefaultLeaseHistory, api.MaxLeaseHistory))
	cmd.Flags().BoolVar(&o.json, "json", false, "print the leases as a JSON array (id, job, name, submitter, gpus, held_since, ends_by, phase, checkpoint_at, billed; with --history: held_from, held_until, outcome, attribution, record, billed)")
	return cmd
}

func runLeases(ctx context.Context, o leasesOptions, g *globalOptions, now time.Time) error {
	if !o.history {
		if o.since != "" || o.max != 0 {
			return errors.New("--since and --max narrow --history: e31 leases --history --since 24h")
		}
		var ls []api.Lease
		if err := g.client().Do(ctx, http.MethodGet, "/v1/leases", nil, nil, &ls); err != nil {
			return err
		}
		if o.json {
			return g.printJSON(ls)
		}
		return printLeases(g.stdout, ls, now)
	}
	since, err := api.ParseSince(o.since, now)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	if o.max < 0 || o.max > api.MaxLeaseHistory {
		return fmt.Errorf("--max %d: want a count from 1 to %d", o.max, api.MaxLeaseHistory)
	}
	q := url.Values{"history": {"1"}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	if o.max > 0 {
		q.Set("max", strconv.Itoa(o.max))
	}
	var ls []api.EndedLease
	if err := g.client().Do(ctx, http.MethodGet, "/v1/leases", q, nil, &ls); err != nil {
		return err
	}
	if o.json {
		return g.printJSON(ls)
	}
	return printLeaseHistory(g.stdout, ls)
}

// printLeases prints the leases this node provides now, a row each.
func printLeases(w io.Writer, ls []api.Lease, now time.Time) error {
	if len(ls) == 0 {
		_, err := fmt.Fprintln(w, "no lease runs on this node's GPUs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tJOB\tNAME\tSUBMITTER\tGPUS\tPHASE\tHELD SINCE\tENDS BY\tCHECKPOINT\tGPU-HOURS\tOWED")
	for _, l := range ls {
		writef(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Job, orDash(l.Name), shortID(l.Submitter),
			leaseGPUs(l.GPUs), l.Phase, clock(l.HeldSince)+" ("+now.Sub(l.HeldSince).Round(time.Second).String()+")",
			clock(l.EndsBy), clock(l.CheckpointAt), hours(l.Billed.GPUHours), owedText(l.Billed))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d lease%s; GPU-hours as the receipts both sides signed so far say, owed under the default policy\n", len(ls), plural(len(ls)))
	return err
}

// printLeaseHistory prints the leases this node provided that ended.
func printLeaseHistory(w io.Writer, ls []api.EndedLease) error {
	if len(ls) == 0 {
		_, err := fmt.Fprintln(w, "no ended lease on record")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tJOB\tSUBMITTER\tGPUS\tHELD FROM\tUNTIL\tOUTCOME\tRECORD\tGPU-HOURS\tOWED")
	var held, owed float64
	for _, l := range ls {
		outcome := orDash(l.Outcome)
		if l.Attribution != "" {
			outcome += " (" + l.Attribution + ")"
		}
		gpus := strconv.Itoa(l.GPUs)
		if l.GPUModel != "" {
			gpus += "× " + l.GPUModel
		}
		writef(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Job, shortID(l.Submitter), gpus,
			clock(l.HeldFrom), clock(l.HeldUntil), outcome, l.Record, hours(l.Billed.GPUHours), owedText(l.Billed))
		held, owed = held+l.Billed.GPUHours, owed+l.Billed.OwedGPUHours
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d lease%s: %s\n", len(ls), plural(len(ls)), heldOwed(held, owed))
	return err
}

// owedText is what a lease is owed, or why nothing is.
func owedText(b api.LeaseBilled) string {
	if b.Own {
		return ownMark
	}
	return hours(b.OwedGPUHours)
}

// leaseGPUs names the GPUs a lease holds: how many of each model.
func leaseGPUs(gs []api.LeaseGPU) string {
	if len(gs) == 0 {
		return "none"
	}
	var models []string
	count := map[string]int{}
	for _, g := range gs {
		if count[g.Model] == 0 {
			models = append(models, g.Model)
		}
		count[g.Model]++
	}
	parts := make([]string, 0, len(models))
	for _, m := range models {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%d× %s", count[m], m)))
	}
	return strings.Join(parts, ", ")
}

// clock is a time of a lease as the reader's clock shows it, "-" for none.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

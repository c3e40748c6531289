package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type receiptsOptions struct {
	job    string
	verify bool
	json   bool
}

func newReceiptsCommand(g *globalOptions) *cobra.Command {
	var o receiptsOptions
	cmd := &cobra.Command{
		Use:   "receipts [--job JOB] [--verify] [--json]",
		Short: "List the signed receipts in this node's ledger, and verify them",
		Long: `receipts lists the receipts of compute held, each signed by the provider and
countersigned by the submitter. SIGNED says who signed: "both", or the one
party of a one-sided record, which a node stores when the other party
vanished before it could countersign; a one-sided record is "superseded"
once the two sign a final receipt of the lease after all. Disputes, leases
whose parties signed different ends (both kept), are listed below.

--verify checks every signature and the hash chain of the whole ledger, and
names the first bad entry: a forged signature, an edited field or a removed
entry. It exits non-zero when verification fails, and counts the one-sided
records and disputed leases not settled since.

--job takes the ID submit printed (or a prefix): the receipts of every
attempt of the job, and of an array or a pipeline's stage every task's and
each of their attempts', followed by what they held and what is owed, the
same sum as status and usage show.

"e31 receipts export" writes them to a file that "e31 verify" checks anywhere.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReceipts(cmd.Context(), o, g)
		},
	}
	cmd.Flags().StringVar(&o.job, "job", "", "only the receipts of this job: every attempt's, and every task's of an array")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "verify signatures and the hash chain")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the receipts as a JSON array, in ledger order; a superseded one-sided record has \"superseded\": true, and each disputed lease adds both versions, each with \"dispute\": {index, version, settled}")
	cmd.AddCommand(newReceiptsExportCommand(g))
	return cmd
}

// errVerify marks a ledger that failed verification.
var errVerify = errors.New("ledger verification failed")

// dispute is an api.Dispute with its versions decoded.
type dispute struct {
	Index      uint64         `json:"index"`
	Lease      string         `json:"lease"`
	Ours       ledger.Receipt `json:"ours"`
	Theirs     ledger.Receipt `json:"theirs"`
	Superseded bool           `json:"superseded,omitempty"`
}

// receiptsResult is what the ledger holds, as e31 receipts prints it.
type receiptsResult struct {
	Receipts   []ledger.Receipt `json:"receipts"`
	Superseded []int            `json:"superseded,omitempty"`
	Disputes   []dispute        `json:"disputes,omitempty"`
	Verify     *api.Verify      `json:"verify,omitempty"`
}

func runReceipts(ctx context.Context, o receiptsOptions, g *globalOptions) error {
	res, err := g.client().Receipts(ctx, o.job, o.verify)
	if err != nil {
		return err
	}
	out := receiptsResult{Superseded: res.Superseded, Verify: res.Verify}
	if err := json.Unmarshal(res.Receipts, &out.Receipts); err != nil {
		return fmt.Errorf("decode receipts: %w", err)
	}
	for _, d := range res.Disputes {
		x := dispute{Index: d.Index, Lease: d.Lease, Superseded: d.Superseded}
		if err := json.Unmarshal(d.Ours, &x.Ours); err != nil {
			return fmt.Errorf("decode dispute of lease %s: %w", d.Lease, err)
		}
		if err := json.Unmarshal(d.Theirs, &x.Theirs); err != nil {
			return fmt.Errorf("decode dispute of lease %s: %w", d.Lease, err)
		}
		out.Disputes = append(out.Disputes, x)
	}
	if o.json {
		b, err := out.jsonArray()
		if err != nil {
			return err
		}
		if _, err := g.stdout.Write(escapeJSON(b)); err != nil {
			return err
		}
	} else {
		printReceipts(g, out)
		if h := res.Held; h != nil {
			writef(g.stdout, "\njob %s: %d leases; %s\n", o.job, h.Leases, heldOwed(h.GPUHours, h.OwedGPUHours))
		}
	}
	if v := res.Verify; v != nil {
		if !v.OK {
			writef(g.stderr, "ledger: %d entries, FIRST BAD: %s\n", v.Entries, v.Problem)
			return errVerify
		}
		fmt.Fprintf(g.stderr, "ledger: %d entries, every signature and the hash chain verify, and every held time is within its lease's terms; %d one-sided records and %d disputed leases not settled\n",
			v.Entries, v.OneSided, v.Disputed)
		if v.Unbounded > 0 {
			fmt.Fprintf(g.stderr, "ledger: %d leases were signed before a lease bounded its held time: their held time is not checked\n", v.Unbounded)
		}
	}
	return nil
}

// receiptMarks are what e31 receipts --json adds to a receipt's own
// fields.
type receiptMarks struct {
	Superseded bool         `json:"superseded,omitempty"`
	Dispute    *disputeMark `json:"dispute,omitempty"`
}

// disputeMark places a receipt in a dispute: the ledger entry holding the
// dispute, whose version of the lease's end it is, and whether a final
// receipt both signed has settled the lease since.
type disputeMark struct {
	Index   uint64 `json:"index"`
	Version string `json:"version"`
	Settled bool   `json:"settled"`
}

// jsonArray is e31 receipts --json: one array of receipts, each with its
// own fields and its marks, indented.
func (res receiptsResult) jsonArray() ([]byte, error) {
	rows := make([]json.RawMessage, 0, len(res.Receipts)+2*len(res.Disputes))
	add := func(r ledger.Receipt, m receiptMarks) error {
		b, err := withMarks(r, m)
		if err != nil {
			return fmt.Errorf("receipt of lease %s: %w", r.Lease, err)
		}
		rows = append(rows, b)
		return nil
	}
	for i, r := range res.Receipts {
		if err := add(r, receiptMarks{Superseded: slices.Contains(res.Superseded, i)}); err != nil {
			return nil, err
		}
	}
	for _, d := range res.Disputes {
		for _, v := range []struct {
			name string
			r    ledger.Receipt
		}{{"ours", d.Ours}, {"theirs", d.Theirs}} {
			if err := add(v.r, receiptMarks{Dispute: &disputeMark{Index: d.Index, Version: v.name, Settled: d.Superseded}}); err != nil {
				return nil, err
			}
		}
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// withMarks is r's JSON object with the fields of m after its own: the
// receipt writes itself (ledger.Receipt.MarshalJSON), so m cannot be a
// field beside it in one struct.
func withMarks(r ledger.Receipt, m receiptMarks) (json.RawMessage, error) {
	obj, err := r.MarshalJSON()
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("a receipt encoded as %.20q, not an object", obj)
	}
	if string(extra) == "{}" {
		return obj, nil
	}
	if string(obj) == "{}" {
		return extra, nil
	}
	out := append(obj[:len(obj)-1:len(obj)-1], ',')
	return append(out, extra[1:]...), nil
}

func printReceipts(g *globalOptions, res receiptsResult) {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tJOB\tSEQ\tFINAL\tHELD\tGPUS\tPHASE\tOUTCOME\tSIGNED")
	for i, r := range res.Receipts {
		signed := "both"
		if r.OneSided() {
			signed = string(r.Signer) + " only"
			if slices.Contains(res.Superseded, i) {
				signed += ", superseded"
			}
		}
		writef(tw, "%s\t%s\t%d\t%v\t%s\t%d\t%s\t%s\t%s\n", r.Lease, r.Job, r.Seq, r.Final, r.Held().Round(time.Millisecond),
			r.GPUs, r.Phase, r.Outcome, signed)
	}
	tw.Flush()
	printGPUsSeen(g, res.Receipts)
	if len(res.Disputes) == 0 {
		return
	}
	fmt.Fprintln(g.stdout, "\ndisputes (each party's signed end of the lease):")
	tw = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tJOB\tVERSION\tSIGNED BY\tHELD\tGPUS\tOUTCOME\tATTRIBUTION\tSTATUS")
	for _, d := range res.Disputes {
		status := "open"
		if d.Superseded {
			status = "superseded"
		}
		for _, v := range []struct {
			name string
			r    *ledger.Receipt
		}{{"ours", &d.Ours}, {"theirs", &d.Theirs}} {
			writef(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Lease, v.r.Job, v.name, versionSigner(v.r),
				v.r.Held().Round(time.Millisecond), v.r.GPUs, v.r.Outcome, v.r.Attribution, status)
		}
	}
	tw.Flush()
}

// printGPUsSeen lists, for each final receipt that names them, the GPUs
// the provider's sandbox found before the run, beside the model the
// provider offered.
func printGPUsSeen(g *globalOptions, rs []ledger.Receipt) {
	var tw *tabwriter.Writer
	for _, r := range rs {
		for _, s := range r.GPUsSeen {
			if tw == nil {
				fmt.Fprintln(g.stdout, "\ngpus seen by the run (the provider's check before it started):")
				tw = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "LEASE\tUUID\tMODEL SEEN\tOFFERED AS")
			}
			writef(tw, "%s\t%s\t%s\t%s\n", r.Lease, s.UUID, s.Model, orDash(r.GPUModel))
		}
	}
	if tw != nil {
		tw.Flush()
	}
}

// versionSigner names the party who signed one version of a dispute: a
// one-sided record names it, a receipt the other side would not
// countersign carries one signature.
func versionSigner(r *ledger.Receipt) string {
	switch {
	case r.OneSided():
		return string(r.Signer)
	case len(r.ProviderSig) > 0 && len(r.SubmitterSig) == 0:
		return string(ledger.SignerProvider)
	case len(r.SubmitterSig) > 0 && len(r.ProviderSig) == 0:
		return string(ledger.SignerSubmitter)
	}
	return "both"
}

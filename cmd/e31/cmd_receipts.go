package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
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
countersigned by the submitter. --verify checks every signature and the hash
chain of the whole ledger, and names the first bad entry: a forged signature,
an edited field or a removed entry. It exits non-zero when verification fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReceipts(cmd.Context(), o, g)
		},
	}
	cmd.Flags().StringVar(&o.job, "job", "", "only the receipts of this job")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "verify signatures and the hash chain")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the receipts as a JSON array")
	return cmd
}

// errVerify marks a ledger that failed verification.
var errVerify = errors.New("ledger verification failed")

func runReceipts(ctx context.Context, o receiptsOptions, g *globalOptions) error {
	res, err := g.client().Receipts(ctx, o.job, o.verify)
	if err != nil {
		return err
	}
	var rs []ledger.Receipt
	if err := json.Unmarshal(res.Receipts, &rs); err != nil {
		return fmt.Errorf("decode receipts: %w", err)
	}
	if o.json {
		if err := g.printJSON(rs); err != nil {
			return err
		}
	} else {
		printReceipts(g, rs)
	}
	if res.Verify != nil {
		if !res.Verify.OK {
			fmt.Fprintf(g.stderr, "ledger: %d entries, FIRST BAD: %s\n", res.Verify.Entries, res.Verify.Problem)
			return errVerify
		}
		fmt.Fprintf(g.stderr, "ledger: %d entries, every signature and the hash chain verify\n", res.Verify.Entries)
	}
	return nil
}

func printReceipts(g *globalOptions, rs []ledger.Receipt) {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tJOB\tSEQ\tFINAL\tHELD\tGPUS\tPHASE\tOUTCOME")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\t%d\t%s\t%s\n", r.Lease, r.Job, r.Seq, r.Final, r.Held().Round(time.Millisecond), r.GPUs, r.Phase, r.Outcome)
	}
	tw.Flush()
}

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/e31network/e31/ledger"
	"github.com/spf13/cobra"
)

type verifyOptions struct{ json bool }

func newVerifyCommand(g *globalOptions) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify FILE [--json]",
		Short: "Check every signature in a receipts export file, with no daemon",
		Long: `verify reads a file written by "e31 receipts export" and checks every
receipt, one-sided record (and the lease both parties signed behind it) and
dispute in it against the public keys inside the peer IDs it names, and the
held time of every receipt and record against the terms of its lease, which
the file carries: nothing before the proposal, nothing past its limit and
the allowances for grace and output. It needs no daemon and no network. It
prints how many entries are two-sided, one-sided, superseded or disputes,
and the totals the signatures vouch for: GPU-hours held, owed and not owed
under the default policy (each lease counted once, as "e31 usage" counts
it). It exits non-zero naming the first entry that fails, and for a file
with no entries at all, which proves nothing. FILE "-" reads stdin.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runVerify(o, g, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (file, ok, entries, two_sided, one_sided, superseded, disputes, leases, unbounded, held: {leases, gpu_hours, owed_gpu_hours, not_owed_gpu_hours, ...}, problem)")
	return cmd
}

// errBadExport marks an export file that failed verification, after its
// problem was printed.
var errBadExport = errors.New("export file does not verify")

// errEmptyExport marks an export file with no entries, after it was said.
var errEmptyExport = errors.New("export file holds no entries")

// verifyResult is what `e31 verify --json` prints.
type verifyResult struct {
	File string `json:"file"`
	OK   bool   `json:"ok"`
	ledger.ExportReport
	// Problem names the first entry that fails; Entries then counts
	// those before it.
	Problem string `json:"problem,omitempty"`
}

func runVerify(o verifyOptions, g *globalOptions, path string) error {
	in := os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		defer f.Close()
		in = f
	}
	rep, err := ledger.VerifyExport(in)
	if err != nil && !errors.Is(err, ledger.ErrBadExport) {
		return fmt.Errorf("verify %s: %w", path, err)
	}
	res := verifyResult{File: path, OK: err == nil, ExportReport: rep}
	switch {
	case err != nil:
		res.Problem = err.Error()
	case rep.Entries == 0:
		res.OK = false
		res.Problem = "the file holds no entries: nothing was exported (was it exported with a --job or --since that matched nothing?)"
	}
	if o.json {
		if perr := g.printJSON(res); perr != nil {
			return perr
		}
	} else if res.OK {
		fmt.Fprintf(g.stdout, "%s: %s\n", path, exportSummary(rep))
		fmt.Fprintf(g.stdout, "%s: %d leases; %s%s\n", path, rep.Held.Leases, heldOwed(rep.Held.GPUHours, rep.Held.OwedGPUHours), lostShare(rep.Held.LostGPUHours))
	} else if err == nil {
		writef(g.stdout, "%s: NOTHING TO VERIFY: %s\n", path, res.Problem)
	} else {
		writef(g.stdout, "%s: FIRST BAD: %s\n", path, res.Problem)
	}
	if !res.OK && err == nil {
		return errEmptyExport
	}
	if !res.OK {
		return errBadExport
	}
	return nil
}

// exportSummary says what a verified export file holds.
func exportSummary(rep ledger.ExportReport) string {
	s := fmt.Sprintf("%d entries: %d two-sided, %d one-sided, %d superseded, %d disputes; every signature verifies",
		rep.Entries, rep.TwoSided, rep.OneSided, rep.Superseded, rep.Disputes)
	if rep.Leases > 0 {
		s += fmt.Sprintf("; the held time of %d leases is within their terms", rep.Leases)
	}
	if rep.Unbounded > 0 {
		s += fmt.Sprintf("; %d leases without terms that bound their held time (signed before the rule, or exported without them): not checked", rep.Unbounded)
	}
	if rep.Verdicts > 0 {
		s += fmt.Sprintf("; %d verdicts on replicas check against the receipts", rep.Verdicts)
		if rep.VerdictsWithoutReceipts > 0 {
			s += fmt.Sprintf(" (%d name replicas whose final receipts are not in the file: checked by signature and majority alone)", rep.VerdictsWithoutReceipts)
		}
	}
	return s
}

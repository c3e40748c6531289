package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/e31network/e31/ledger"
	"github.com/spf13/cobra"
)

type exportOptions struct {
	job string
	out string
}

func newReceiptsExportCommand(g *globalOptions) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export [--job JOB] [-o FILE]",
		Short: "Write the ledger's receipts, records and disputes to a self-contained file",
		Long: `export writes the receipts in this node's ledger (all, or one job's), its
one-sided records with their lease evidence, and its disputes, as one JSON
file (format "e31-receipts/1") to FILE or to stdout. Every entry carries its
signatures and the peer IDs that embed the signers' public keys, so anyone
can check the file with "e31 verify FILE", with no daemon and no network.
The file proves what each party signed, not that the ledger is whole.

--job takes the ID submit printed (or a prefix) and writes every entry of
the job's attempts, and of an array or a pipeline's stage every entry of
its tasks and their attempts. With -o, the file is verified before it
replaces FILE, and what it holds is printed: its entries and what its
leases held and owe, the figures "e31 verify FILE" prints.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReceiptsExport(cmd.Context(), o, g)
		},
	}
	cmd.Flags().StringVar(&o.job, "job", "", "only the entries of this job: every attempt's, and every task's of an array")
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "write to FILE (replaced only once the whole file is written and verifies) instead of stdout")
	return cmd
}

func runReceiptsExport(ctx context.Context, o exportOptions, g *globalOptions) error {
	if o.out == "" {
		_, err := g.client().ExportReceipts(ctx, o.job, g.stdout)
		return err
	}
	// Write beside FILE and rename, so that a failed export never leaves
	// a short file under the name asked for.
	f, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := g.client().ExportReceipts(ctx, o.job, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("export: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("export: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return fmt.Errorf("export: %w", err)
	}
	rep, verr := ledger.VerifyExport(f)
	if err := f.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if verr != nil {
		return fmt.Errorf("the daemon's export does not verify, not written: %w", verr)
	}
	if err := os.Rename(f.Name(), o.out); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(g.stderr, "%s: %s\n", o.out, exportSummary(rep))
	if rep.Entries == 0 {
		fmt.Fprintf(g.stderr, "%s: no entries matched: the file proves nothing, and e31 verify refuses it\n", o.out)
		return nil
	}
	fmt.Fprintf(g.stderr, "%s: %d leases; %s%s\n", o.out, rep.Held.Leases, heldOwed(rep.Held.GPUHours, rep.Held.OwedGPUHours), lostShare(rep.Held.LostGPUHours))
	return nil
}

package main

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/rogue"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

// rogueBenchOptions are the flags of the rogue-bench command.
type rogueBenchOptions struct {
	run  rogue.Options
	disk string
	bin  string
	json bool
	keep bool
}

func (o *rogueBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.run.Flood.Events, "flood-events", 100, "checkpoint events the flood sends at once")
	f.IntVar(&o.run.Flood.DAGs, "flood-dags", 4, "distinct checkpoints the flood's events name")
	f.Int64Var(&o.run.Flood.DAGBytes, "flood-bytes", 96<<20, "size of each of the flood's checkpoints")
	f.StringVar(&o.disk, "disk", "64MiB", "request.disk of the flooded job")
	f.IntVar(&o.run.SquatRounds, "squat-rounds", 3, "times the gang squatter takes its part at most")
	f.IntVar(&o.run.GangRounds, "gang-rounds", 3, "times the rogue submitter's gang is leased and left to lapse at most (each lapse takes the providers' 30-second gang wait, e31d --gang-start-within)")
	f.Int64Var(&o.run.RelayPush, "relay-push", 4<<20, "bytes the relay abuse pushes between two members with no lease")
	f.Int64Var(&o.run.RelayBudget, "relay-budget", rogue.DefaultRelayBudget, "the relay's byte budget a peer (e31d --relay-budget-peer), which the relay abuse pushes a lease's circuit past")
	f.StringSliceVar(&o.run.Networks, "only", nil, "run only these networks: providers, submitters, relay (default all)")
	f.StringVar(&o.bin, "bin", "", "folder holding e31d and e31 to attack, built from another commit (default: build this one)")
	f.BoolVar(&o.run.Unbounded, "unbounded", false, "propose leases without the held-time rule, as daemons from before it (8ec50e8 and older) need")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.BoolVar(&o.keep, "keep", false, "keep the networks' data dirs and logs")
}

func newRogueBenchCommand() *cobra.Command {
	var o rogueBenchOptions
	cmd := &cobra.Command{
		Use:   "rogue-bench",
		Short: "Play every attack of a cheating peer on real daemons and say what each won (needs root and runc)",
		Long: `rogue-bench starts two networks of e31d on 127.0.0.1, each an honest
submitter and two honest providers with honest jobs running, and plays on
them every attack of issue 51 with rogue peers (testnet/byzantine/rogue):
as providers, backdated and unassigned proposals, receipts past the limit
and after the final one, staging a job it was not reserved, false
completed and checkpoint_at, a checkpoint flood and an offer with terminal
escapes; as submitters, never countersigning and never sending a gang
lease; and squatting a gang's part. A third network, one daemon serving
as a relay that carries data (--relay-service --relay-data), meets relay
abuse: a stranger's slot and circuit, and bytes pushed between members
with no lease and past a byte budget. --only runs some networks. It prints the table "attack | what
happened": each request's answer with its refusal code, and what the
rogue won (GPU-hours countersigned, bytes obtained, time GPUs were held).
--bin attacks daemons built elsewhere, such as from a commit before the
defences: go build -o DIR ./cmd/e31d ./cmd/e31 in a worktree of it, and
--unbounded for daemons from before the lease terms bound held time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRogueBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runRogueBench(ctx context.Context, o rogueBenchOptions, stdout, stderr io.Writer) error {
	if os.Geteuid() != 0 {
		return bench.ErrNeedsRoot
	}
	disk, err := market.ParseSize(o.disk)
	if err != nil {
		return err
	}
	o.run.Disk = disk
	var bin cluster.Binaries
	if o.bin != "" {
		dir, err := filepath.Abs(o.bin)
		if err != nil {
			return err
		}
		bin = cluster.Binaries{E31d: filepath.Join(dir, "e31d"), E31: filepath.Join(dir, "e31")}
	}
	dir, done, err := workDir("", "e31-rogue-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := rogue.Run(ctx, dir, bin, progress(stderr), o.run)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, rep, rep.WriteMarkdown)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type doctorOptions struct{ json bool }

func newDoctorCommand(g *globalOptions) *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what e31d needs on this machine: ok, warn or fail, and how to fix each",
		Long: `doctor asks the daemon to check its machine with its own configuration, as
e31d doctor does before a daemon starts: the OCI runtime (a probe container),
cgroups, user namespaces and overlayfs, the job disk, the NVIDIA driver and
GPUs, CDI specs, free disk for the data dir, the listen addresses and clock
sync; and how peers reach the daemon (reachability: public, relayed, or
unreachable with why and the fix), as the running daemon knows it. Where no
daemon answers, it runs e31d doctor (beside e31, or on PATH)
with e31d's defaults.

The exit status is 1 when any check fails; warnings alone exit 0.`,
		Example: `  e31 doctor
  e31 --api /var/lib/e31/e31.sock doctor --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the checks as JSON")
	return cmd
}

// errChecksFailed makes e31 doctor exit non-zero when a check failed.
var errChecksFailed = errors.New("checks failed")

func runDoctor(ctx context.Context, o doctorOptions, g *globalOptions) error {
	rep, err := g.client().Doctor(ctx)
	if errors.Is(err, api.ErrNoDaemon) {
		return runLocalDoctor(ctx, o, g, err)
	}
	if err != nil {
		return err
	}
	if o.json {
		err = g.printJSON(rep)
	} else {
		err = rep.WriteText(g.stdout)
	}
	if err != nil {
		return err
	}
	if n := rep.Count(api.DoctorFail); n > 0 {
		return fmt.Errorf("%d %w", n, errChecksFailed)
	}
	return nil
}

// runLocalDoctor runs e31d doctor on this machine when no daemon answers:
// the checks need e31d's code (NVML among it), which e31 does not carry.
func runLocalDoctor(ctx context.Context, o doctorOptions, g *globalOptions, noDaemon error) error {
	bin := e31dBinary()
	if bin == "" {
		return fmt.Errorf("%w; and no e31d beside e31 or on PATH to check this machine without one", noDaemon)
	}
	fmt.Fprintf(g.stderr, "no e31d answers at %s: checking this machine with %s doctor and e31d's defaults\n", g.api, bin)
	args := []string{"doctor"}
	if o.json {
		args = append(args, "--json")
	}
	cmd := osexec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = g.stdout, g.stderr
	if err := cmd.Run(); err != nil {
		if errors.As(err, new(*osexec.ExitError)) {
			return fmt.Errorf("e31d doctor: %w", errChecksFailed)
		}
		return fmt.Errorf("run %s doctor: %w", bin, err)
	}
	return nil
}

// e31dBinary is the e31d installed beside this e31, else the one on PATH,
// else "".
func e31dBinary() string {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "e31d")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := osexec.LookPath("e31d"); err == nil {
		return p
	}
	return ""
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/spf13/cobra"
)

// errGPUProbe is returned when the probe failed, after its result was
// printed, so that the exit status says so.
var errGPUProbe = errors.New("GPU probe failed")

// newGPUProbeCommand runs a small CUDA kernel on every GPU this process
// sees. It is what e31d doctor --gpu-job runs inside the sandbox (the
// binary mounted as the job's input), hidden because on its own it says
// nothing of the sandbox.
func newGPUProbeCommand() *cobra.Command {
	var asJSON, unsetVisible bool
	cmd := &cobra.Command{
		Use:   "gpu-probe",
		Short: "Run a small CUDA kernel on every GPU this process can see",
		Long: `gpu-probe loads the NVIDIA driver (libcuda.so.1) and, on every device it
reports, allocates memory, runs a small kernel and checks its output. It needs
no CUDA toolkit. e31d doctor --gpu-job runs it inside a job's sandbox, with
--unset-cuda-visible-devices: the sandbox sets CUDA_VISIBLE_DEVICES to the
leased GPUs, which would hide from the driver any other GPU the sandbox let in,
so without it the count would not show whether the sandbox isolates its GPUs.

The exit status is 1 when the driver cannot be loaded, it reports no device, or
any device fails.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		// A failed probe is not a usage error.
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if unsetVisible {
				// Before the driver is loaded, which reads it once.
				if err := os.Unsetenv("CUDA_VISIBLE_DEVICES"); err != nil {
					return err
				}
			}
			return runGPUProbe(cmd.Context(), cmd.OutOrStdout(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&unsetVisible, "unset-cuda-visible-devices", false, "probe every device the driver can reach, not only those CUDA_VISIBLE_DEVICES names")
	return cmd
}

func runGPUProbe(ctx context.Context, out io.Writer, asJSON bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	rep, probeErr := gpuprobe.Probe(ctx)
	var err error
	if asJSON {
		err = json.NewEncoder(out).Encode(rep)
	} else {
		err = writeGPUProbe(out, rep)
	}
	if err != nil {
		return err
	}
	if probeErr != nil {
		return fmt.Errorf("%w: %w", errGPUProbe, probeErr)
	}
	return nil
}

// writeGPUProbe prints one line per device.
func writeGPUProbe(w io.Writer, rep gpuprobe.Report) error {
	if rep.CUDA != "" {
		if _, err := fmt.Fprintf(w, "driver supports CUDA %s, %d devices\n", rep.CUDA, rep.DeviceCount); err != nil {
			return err
		}
	}
	for _, d := range rep.Devices {
		line := fmt.Sprintf("device %d: %s (%s), %d MiB: ", d.Index, d.Name, d.UUID, d.MemoryBytes>>20)
		if d.KernelOK {
			line += fmt.Sprintf("%d MiB allocated, kernel ran over %d elements in %s, %s in all",
				d.AllocatedBytes>>20, d.Elements, d.KernelTook.Round(time.Microsecond), d.Took.Round(time.Millisecond))
		} else {
			line += "failed: " + d.Error
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	// The probe's own error goes to stderr with the exit status.
	return nil
}

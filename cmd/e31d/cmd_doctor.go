package main

import (
	"encoding/json"
	"fmt"

	"github.com/e31network/e31/cmd/e31d/doctor"
	"github.com/e31network/e31/market"
	"github.com/spf13/cobra"
)

// newDoctorCommand checks this machine with the flags (or config file) e31d
// would be started with.
func newDoctorCommand() *cobra.Command {
	var o options
	var asJSON, gpuJob bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine before it offers GPUs",
		Long: `doctor checks what e31d needs to run jobs here: the OCI runtime (it must run
a probe container), cgroups, user namespaces and overlayfs (for jobs that bring
their own image), the NVIDIA driver and GPUs, CDI specs, free disk for the
data dir (that it can be written) and the layer cache, the listen addresses,
clock sync, and whether peers can reach this machine: a short-lived host of its
own asks the bootstrap peers (public, relayed through a bootstrap peer that
serves as a relay, or unreachable, why and the fix; up to 45 s); under Windows'
WSL 2, also what GPU jobs there lack (/dev/dxg, NVML in /usr/lib/wsl/lib on the
loader path, systemd). Each check
is ok, warn or fail, with how to fix it. Run it as root, with the same --config
or flags as the daemon.

--gpu-job also runs one job on each GPU, in the sandbox leases run in, with only
that GPU: this e31d, mounted into the sandbox, allocates memory on the GPU and
runs a small CUDA kernel through the driver (no CUDA toolkit needed). Each GPU's
result says whether the sandbox saw exactly that GPU, what the kernel did, and
whether the GPU came in through CDI or the driver's device nodes. Without a
driver it warns and runs nothing.

The exit status is 1 when any check fails; warnings alone exit 0.`,
		Example: `  sudo e31d doctor
  sudo e31d doctor --config /etc/e31/e31d.toml --json
  sudo e31d doctor --gpu-job`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config != "" {
				if err := applyFile(cmd.Flags(), o.config, &o); err != nil {
					return err
				}
			}
			cache, err := market.ParseSize(o.file.ImageCacheSize)
			if err != nil {
				return fmt.Errorf("--image-cache-size: %w", err)
			}
			var reserve market.Size
			if o.file.DiskReserve != "" {
				if reserve, err = market.ParseSize(o.file.DiskReserve); err != nil {
					return fmt.Errorf("--disk-reserve: %w", err)
				}
			}
			if err := countAsPublic(o.file.NATPublicNet); err != nil {
				return err
			}
			rep := doctor.Run(cmd.Context(), doctor.Machine{}, doctor.Options{
				DataDir:         o.file.Data,
				ImageCacheBytes: int64(cache),
				DiskReserve:     uint64(reserve),
				UnboundedDisk:   o.file.UnboundedDisk,
				Listen:          o.file.Listen,
				Runtime:         o.file.Runtime,
			})
			rep.Checks = append(rep.Checks, doctor.Reach(cmd.Context(), doctor.ReachOptions{Listen: o.file.Listen, NAT: o.file.NAT, Bootstrap: o.file.Bootstrap}))
			if gpuJob {
				rep.Checks = append(rep.Checks, doctor.GPUJobs(cmd.Context(), doctor.GPUJobOptions{
					DataDir: o.file.Data,
					Runtime: o.file.Runtime,
				})...)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(out)
			}
			if err != nil {
				return err
			}
			if n := rep.Count(doctor.Fail); n > 0 {
				return fmt.Errorf("%d %w", n, doctor.ErrFailed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "the daemon's TOML config file (flags win over it)")
	f.StringVar(&o.file.Data, "data", defaultDataDir(), "the daemon's data dir (env E31_DATA)")
	f.StringArrayVar(&o.file.Listen, "listen", nil, "libp2p multiaddr the daemon will listen on, repeatable")
	f.StringVar(&o.file.Runtime, "runtime", "", "OCI runtime binary (default: runc, else crun, whichever works)")
	f.StringVar(&o.file.ImageCacheSize, "image-cache-size", "64GiB", "disk the layer cache may take under DATA/layers")
	f.StringVar(&o.file.DiskReserve, "disk-reserve", "", "the daemon's --disk-reserve (default: a tenth of the data dir's filesystem and at least 20GiB, at most a quarter of it)")
	f.BoolVar(&o.file.UnboundedDisk, "unbounded-disk", false, "the daemon's --unbounded-disk: jobs are taken where their disks cannot be bounded")
	f.StringArrayVar(&o.file.Bootstrap, "bootstrap", nil, "the daemon's --bootstrap peers, asked whether they can reach this machine; repeatable")
	f.StringVar(&o.file.NAT, "nat", "auto", "the daemon's --nat: auto (on unless every --listen is loopback), on or off; off skips the reachability check")
	f.StringArrayVar(&o.file.NATPublicNet, "nat-public-net", nil, "the daemon's --nat-public-net: a private IPv4 network that counts as public; repeatable")
	f.BoolVar(&asJSON, "json", false, "print the checks as JSON")
	f.BoolVar(&gpuJob, "gpu-job", false, "also run a small CUDA job in the sandbox on each GPU, as a lease would")
	return cmd
}

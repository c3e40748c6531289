package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

func newDemoCommand() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a sample job through all five steps on a local 3-node network",
		Long: `demo starts three e31d nodes on 127.0.0.1: node0 only submits (a laptop),
node1 and node2 each offer two simulated H100s. It submits a job that reads an
input folder, writes checkpoints and an output, follows it through submit,
rent, run, output and release with the e31 command, fetches the output,
verifies the signed receipts on both sides, and stops the network.

The job runs in its own image, a busybox root that demo builds with umoci
(an oci-archive in the demo's folder); the provider fetches the image from
the submitter and unpacks its layer into its layer cache. Where the image
cannot be built, or no provider can run images, demo says why and runs the
job on the provider's root instead.

Jobs run in a runc sandbox: where runc, umoci or busybox-static is missing,
demo installs it with apt-get (as root) and says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context(), keep) },
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the demo's folder (data dirs, logs, output) instead of removing it")
	return cmd
}

// ensureRunc makes sure an OCI runtime is there, installing runc from
// Debian's packages when it is missing and we may.
func ensureRunc(ctx context.Context, say func(string, ...any)) error {
	if _, err := exec.LookPath("runc"); err == nil {
		return nil
	}
	if _, err := exec.LookPath("crun"); err == nil {
		return nil
	}
	return aptInstall(ctx, say, "runc (the OCI runtime that sandboxes jobs) is missing", "runc")
}

// demoJob reads every file of the input, checkpoints its progress, and
// writes a summary.
const demoJob = `name: line-count
work:
  image: oci-archive:./` + demoImage + `
  command:
    - sh
    - -c
    - |
      set -e
      start=1
      [ -f /ckpt/done ] && start=$(($(cat /ckpt/done) + 1))
      i=0
      for f in /data/*.txt; do
        i=$((i + 1))
        [ $i -lt $start ] && continue
        echo "$(basename $f) $(wc -l < $f) lines" >> /out/summary.txt
        echo $i > /ckpt/done
        sleep 0.5
      done
      echo "counted $i files on GPU $CUDA_VISIBLE_DEVICES"
  env:
    SEED: "1"
data:
  - source: ./dataset
    mount: /data
request:
  gpus: 1
  cpus: 1
  memory: 256MiB
  limit: 5m
output:
  path: /out
  checkpoints:
    path: /ckpt
    every: 1s
`

func runDemo(ctx context.Context, keep bool) error {
	began := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("\n[%5.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := ensureRunc(ctx, step); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "e31-demo-")
	if err != nil {
		return err
	}
	if keep {
		defer fmt.Printf("\nkept %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	step("building e31d and e31")
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	step("starting 3 nodes on 127.0.0.1: node0 submits, node1 and node2 offer 2 simulated H100s each")
	c, err := cluster.Start(ctx, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "2xH100:80GiB"},
		Dir:           filepath.Join(dir, "net"),
		Bin:           bin,
		Heartbeat:     time.Second,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s"},
		Metrics:       true,
	})
	if err != nil {
		return err
	}
	defer c.Stop()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitConverged(wctx); err != nil {
		return err
	}
	e31 := func(node int, args ...string) error {
		fmt.Printf("$ e31 %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, bin.E31, args...)
		cmd.Env = append(os.Environ(), "E31_API="+c.Nodes[node].API, "E31_API_TOKEN_FILE="+c.Nodes[node].TokenFile)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		return cmd.Run()
	}
	step("every node sees every offer")
	if err := e31(0, "nodes"); err != nil {
		return err
	}

	// The job's input: a small dataset next to its declaration.
	data := filepath.Join(dir, "dataset")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	for i := 1; i <= 4; i++ {
		body := strings.Repeat(fmt.Sprintf("sample %d\n", i), i*10)
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("part-%d.txt", i)), []byte(body), 0o644); err != nil {
			return err
		}
	}
	job := demoJob
	step("building the job's image: a busybox root, with umoci, as the oci-archive %s", demoImage)
	image := true
	if err := buildDemoImage(ctx, dir, step); err != nil {
		fmt.Printf("    cannot build the image (%v)\n    the job runs on the provider's root instead\n", err)
		image = false
	} else if err := imageProviders(c, []int{1, 2}); err != nil {
		fmt.Printf("    no provider can run image jobs here (%v)\n    the job runs on the provider's root instead\n", err)
		image = false
	}
	var imageCID string
	if image {
		step("importing the image on node0: one DAG in its content store, named by a CID")
		if err := e31(0, "image", "import", "oci-archive:./"+demoImage); err != nil {
			return err
		}
		ims, err := c.Client(0).Images(ctx)
		if err != nil || len(ims) != 1 {
			return fmt.Errorf("list node0's images: %d, %v", len(ims), err)
		}
		imageCID = ims[0].CID
		fmt.Printf("    the declaration names image %s (%d layer(s), %d bytes); submit signs that CID\n", imageCID, ims[0].Layers, ims[0].Size)
	} else {
		job = strings.Replace(job, "  image: oci-archive:./"+demoImage+"\n", "", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(job), 0o644); err != nil {
		return err
	}
	step("submitting job.yaml from node0 and following it through submit, rent, run, output, release")
	fmt.Print(indent(job))
	if err := e31(0, "submit", "job.yaml", "--wait", "-o", "output"); err != nil {
		return err
	}
	step("the output came back, content-addressed and verified")
	summary, err := os.ReadFile(filepath.Join(dir, "output", "out", "summary.txt"))
	if err != nil {
		return err
	}
	fmt.Print(indent(string(summary)))
	logs, _ := os.ReadFile(filepath.Join(dir, "output", "stdout.log"))
	fmt.Print(indent("stdout: " + string(logs)))

	jobs, err := c.Client(0).Jobs(ctx)
	if err != nil || len(jobs) != 1 {
		return fmt.Errorf("list the demo's job: %v", err)
	}
	provider := slices.IndexFunc(c.Nodes, func(n *cluster.Node) bool { return n.PeerID == jobs[0].Provider })
	if provider < 0 {
		return fmt.Errorf("the job's provider %s is not one of the demo's nodes", jobs[0].Provider)
	}
	p := c.Nodes[provider]
	if image {
		unpacked, err := metric(ctx, p.Metrics, "e31_image_layers_unpacked_total")
		if err != nil {
			return err
		}
		hits, err := metric(ctx, p.Metrics, "e31_image_layer_cache_hits_total")
		if err != nil {
			return err
		}
		step("the job ran in its image: the provider (%s) fetched %s from node0 and unpacked %.0f layer(s) into its layer cache (%.0f found there already)", p.Name, imageCID, unpacked, hits)
	}

	step("the submitter's ledger: receipts signed by both sides, hash-chained")
	if err := e31(0, "receipts", "--verify"); err != nil {
		return err
	}
	step("the provider's ledger (%s): the same receipts, signed by the same two keys", p.Name)
	if err := e31(provider, "receipts", "--verify"); err != nil {
		return err
	}
	step("the GPUs are back in the pool")
	if err := e31(0, "nodes"); err != nil {
		return err
	}
	step("stopping the network")
	c.Stop()
	if image {
		step("done: five steps, one job in its own image, two signed ledgers")
	} else {
		step("done: five steps, one job on the provider's root, two signed ledgers")
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

package nat

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/netns"
)

// Options size a run.
type Options struct {
	// Size is the size of the staged input, in bytes.
	Size int64
}

// Check says why this machine cannot run the benchmark, or nil: it needs
// root and the tools of network namespaces (testnet/netns).
func Check() error {
	if err := netns.Available(); err != nil {
		return fmt.Errorf("nat-bench builds network namespaces: %w (run it as root, with iproute2, nftables and util-linux installed)", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("nat-bench runs jobs in runc sandboxes, which need root")
	}
	return nil
}

// Row is one way of running the daemons and its figures.
type Row struct {
	Name string
	// ToLease is from both home daemons' start (the job is submitted then)
	// to the lease signed by both sides.
	ToLease time.Duration
	// Path is the job's data path, as its status reported it while the
	// lease lived: direct, relayed-data (through the relay) or relayed.
	Path string
	// StagingMiBs is the staging throughput; zero where not measured.
	StagingMiBs float64
	Staging     time.Duration
	Note        string
}

// Report is a run's rows, one per way of running the daemons.
type Report struct {
	Size    int64
	Rows    []Row
	LoadEnd string
}

// Run builds e31d and e31 into dir/bin and runs the daemons behind each
// kind of router (netns.Routers), then on loopback, one after another, in
// dir; log, if not nil, receives progress lines. Check says whether it can.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	rep := Report{Size: o.Size}
	logf := bench.Env{Log: log}.Logf
	logf("building e31d and e31 (load %s)", bench.LoadAvg())
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return rep, err
	}
	input := filepath.Join(dir, "input")
	if err := writeRandomFile(filepath.Join(input, "blob"), o.Size); err != nil {
		return rep, err
	}
	type run struct {
		name   string
		router netns.Router
		nat    bool
	}
	var runs []run
	for _, r := range netns.Routers {
		runs = append(runs, run{r.String() + " router", r, true})
	}
	runs = append(runs, run{"loopback, no NAT", 0, false})
	for _, r := range runs {
		logf("%s: starting the daemons", r.name)
		row, err := runOne(ctx, bin, filepath.Join(dir, strings.Fields(r.name)[0]), r.nat, r.router, input, o.Size, logf)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", r.name, err)
		}
		row.Name = r.name
		rep.Rows = append(rep.Rows, row)
	}
	rep.LoadEnd = bench.LoadAvg()
	logf("done (load %s)", rep.LoadEnd)
	return rep, nil
}

// WriteText prints the rows as a table, then each row's note.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "network\tstart to lease\tdata path\tstaging %s\tthroughput\t\n", bench.HumanBytes(r.Size))
	for _, row := range r.Rows {
		staging, tput := "-", "-"
		if row.StagingMiBs > 0 {
			staging = fmt.Sprintf("%.2f s", row.Staging.Seconds())
			tput = fmt.Sprintf("%.0f MiB/s", row.StagingMiBs)
		}
		fmt.Fprintf(tw, "%s\t%.1f s\t%s\t%s\t%s\t\n", row.Name, row.ToLease.Seconds(), row.Path, staging, tput)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", row.Name, row.Note)
		}
	}
	_, err := fmt.Fprintf(w, "load average at the end: %s\n", r.LoadEnd)
	return err
}

// runOne starts a submitter and a provider, behind NAT (router in front
// of the provider, and a bootstrap peer that serves as a relay carrying
// data) or on loopback, submits a job staging an input of size the moment
// both have started, and times its lease and its staging.
func runOne(ctx context.Context, bin cluster.Binaries, dir string, nat bool, router netns.Router, input string, size int64, logf func(string, ...any)) (Row, error) {
	var row Row
	var nodes []*cluster.Node
	defer func() {
		for _, n := range slices.Backward(nodes) {
			n.Stop()
		}
	}()
	start := func(name string, prefix []string, args ...string) (*cluster.Node, error) {
		n, err := cluster.StartNode(ctx, bin, name, filepath.Join(dir, name), prefix, append([]string{"--network", "natbench", "--heartbeat", "1s"}, args...))
		if err == nil {
			nodes = append(nodes, n)
		}
		return n, err
	}
	var subPrefix, provPrefix, subArgs, provArgs []string
	if !nat {
		subArgs = []string{"--listen", "/ip4/127.0.0.1/tcp/0"}
	} else {
		nw, err := netns.New(ctx, netns.Options{RouterA: router})
		if err != nil {
			return row, err
		}
		defer func() {
			if err := nw.Close(); err != nil {
				logf("%v", err)
			}
		}()
		in := func(ns string) []string { return []string{"nsenter", "--net=/run/netns/" + ns, "--"} }
		natArgs := []string{"--nat", "on", "--nat-public-net", netns.Internet}
		boot, err := start("bootstrap", in(nw.Pub), append(natArgs, "--relay-service", "--relay-data",
			"--listen", "/ip4/"+netns.PubIP+"/tcp/4001", "--listen", "/ip4/"+netns.PubIP+"/udp/4001/quic-v1")...)
		if err != nil {
			return row, err
		}
		home := append(natArgs, "--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1")
		for _, a := range boot.Addrs {
			home = append(home, "--bootstrap", a)
		}
		subPrefix, provPrefix = in(nw.HomeB), in(nw.HomeA)
		subArgs, provArgs = home, slices.Clone(home)
	}
	sub, err := start("submitter", subPrefix, subArgs...)
	if err != nil {
		return row, err
	}
	scl := sub.Client()
	if !nat {
		for _, a := range sub.Addrs {
			provArgs = append(provArgs, "--bootstrap", a)
		}
		provArgs = append(provArgs, "--listen", "/ip4/127.0.0.1/tcp/0")
	}
	// --no-prestage: the provider fetches the input once leased, under the
	// meter, so that the receipt's staging phase is the transfer over the
	// path the lease found. Fetched before the proposal, it would be ~0.
	// --debug-disk-free: what the job is granted does not depend on this
	// machine's disk (cluster.Options.RealDiskByNode).
	prov, err := start("provider", provPrefix, append(provArgs, "--sim-gpus", "1xH100:80GiB", "--cpus", "64", "--memory", "256GiB", "--no-prestage",
		"--debug-disk-free", "1TiB")...)
	if err != nil {
		return row, err
	}
	started := time.Now()
	logf("staging %s", bench.HumanBytes(size))
	id, err := submitJob(ctx, scl, natBenchDecl("staging", "test -s /data/blob && cp /data/blob /out/blob", input))
	if err != nil {
		return row, err
	}
	j, err := bench.WaitJob(ctx, scl, id, 10*time.Minute, func(j api.Job) (bool, error) {
		if j.Path != "" {
			row.Path = j.Path
		}
		return j.State == api.JobReleased, nil
	})
	if err != nil {
		return row, err
	}
	rent, ok := bench.StepAt(j, api.StepRent)
	if !ok || j.Provider != prov.PeerID {
		return row, fmt.Errorf("job ended %s/%s without a lease from the provider (%s)", j.State, j.Outcome, j.Reason)
	}
	row.ToLease = rent.Sub(started)
	if row.Path == "" {
		row.Path, _ = peerPath(ctx, scl, prov.PeerID)
	}
	if j.Outcome != string(ledger.OutcomeCompleted) {
		row.Note = fmt.Sprintf("the job ended %s/%s: %s", j.Outcome, j.Attribution, j.Reason)
		return row, nil
	}
	staging, err := stagingPhase(ctx, scl, id)
	if err != nil {
		return row, err
	}
	row.Staging = staging
	row.StagingMiBs = float64(size) / (1 << 20) / staging.Seconds()
	return row, nil
}

func released(j api.Job) (bool, error) { return j.State == api.JobReleased, nil }

func natBenchDecl(name, script, input string) market.Declaration {
	d := market.NewDeclaration(name, []string{"sh", "-c", script}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	d.Request.Memory = 256 * market.MiB
	if input != "" {
		d.Data = []market.Input{{Source: input, Mount: "/data"}}
	}
	return d
}

func submitJob(ctx context.Context, cl *api.Client, d market.Declaration) (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	j, err := cl.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		return "", fmt.Errorf("submit %s: %w", d.Name, err)
	}
	return j.ID, nil
}

// peerPath is how the node reaches p, and why when only through a relay.
func peerPath(ctx context.Context, cl *api.Client, p string) (string, string) {
	peers, err := cl.Peers(ctx)
	if err != nil {
		return "unknown", err.Error()
	}
	for _, x := range peers {
		if x.PeerID == p {
			return x.Path, x.PathReason
		}
	}
	return "none", "not connected"
}

// stagingPhase reads the staging phase from the job's final receipt.
func stagingPhase(ctx context.Context, cl *api.Client, job string) (time.Duration, error) {
	var final *ledger.Receipt
	err := waitFor(ctx, 30*time.Second, "the final receipt", func() bool {
		res, err := cl.Receipts(ctx, job, false)
		if err != nil {
			return false
		}
		var rs []ledger.Receipt
		if json.Unmarshal(res.Receipts, &rs) != nil {
			return false
		}
		for _, r := range rs {
			if r.Final {
				final = &r
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(final.Phases.Staging * float64(time.Second)), nil
}

func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		if err := task.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func writeRandomFile(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package rogue

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Network is the networks' name.
const Network = "rogue"

// The timings of both networks. Every bound the submitter's defences use
// derives from them (node/submitter, avoid.go): a lease with no receipt
// countersigned is given up 2 receipt intervals and a proposal's lifetime
// after it was signed; a silent provider is lost after 3s; an offer not
// heard of for 3 heartbeats is no current offer, which a rogue's genuine
// lease needs: a heartbeat of a second leaves room for a loaded machine.
const (
	heartbeat       = time.Second
	proposalTTL     = 1500 * time.Millisecond
	receiptInterval = time.Second
	// gangStartWithin is how long SubmitterNet's providers wait for a
	// gang lease (e31d --gang-start-within): each lapse of the rogue's
	// gang costs that much, not a provider's default two minutes.
	gangStartWithin = 30 * time.Second
)

func commonArgs(epoch time.Duration) []string {
	return []string{"--epoch", epoch.String(), "--proposal-ttl", proposalTTL.String(),
		"--receipt-interval", receiptInterval.String(), "--provider-lost-after", "3s", "--grace", "1s"}
}

// providerEpoch is ProviderNet's epoch, and providerDelay the view's cut
// before each: the honest provider that runs no pass between epochs
// proposes at the earliest providerDelay after a job arrives, while a
// rogue proposes as the declaration reaches it.
const (
	providerEpoch = time.Second
	providerDelay = 200 * time.Millisecond
)

// ProviderNet is the network of the rogue providers' attacks, for
// cluster.Start (the caller sets Dir and Bin): node 0 submits, node 1
// offers two H100s (the honest jobs beside the attacks), node 2 two GPUs
// of a model a rogue offers too, and proposes only what an epoch's Match
// gives it, so that a rogue's proposal for a job Match gave node 2 comes
// first.
func ProviderNet() cluster.Options {
	return cluster.Options{
		N: 3, SimGPUsByNode: []string{"", "2xH100:80GiB", "2xSHARED:80GiB"},
		Heartbeat: heartbeat, Network: Network, Metrics: true,
		Args:       append(commonArgs(providerEpoch), "--epoch-delay", providerDelay.String()),
		ArgsByNode: [][]string{nil, nil, {"--no-fast-path"}},
	}
}

// SubmitterNet is the network of the rogue submitters' attacks and the
// gang squat, for cluster.Start (the caller sets Dir and Bin): node 0
// submits, nodes 1 and 2 offer two GANG GPUs each (the honest gang and
// the honest jobs) and one PAIR each (the rogue's gang); node 1 alone
// offers a SOLO (the rogue submitter's single job, so that one provider
// alone can take it and strike its submitter).
func SubmitterNet() cluster.Options {
	return cluster.Options{
		N: 3, SimGPUsByNode: []string{"", "2xGANG:80GiB,1xSOLO:80GiB,1xPAIR:80GiB", "2xGANG:80GiB,1xPAIR:80GiB"},
		Heartbeat: heartbeat, Network: Network, Metrics: true,
		Args: append(commonArgs(250*time.Millisecond), "--gang-start-within", gangStartWithin.String()),
	}
}

// rogueConfig is a rogue's config on a network of epoch.
func rogueConfig(dir string, epoch time.Duration, o Options) rogue.Config {
	return rogue.Config{Network: Network, Dir: dir, Epoch: epoch, ProposalTTL: proposalTTL, ReceiptInterval: receiptInterval, Heartbeat: heartbeat, Unbounded: o.Unbounded}
}

// join starts a rogue connected to every node of c, on both topics.
func join(ctx context.Context, c *cluster.Cluster, cfg rogue.Config) (*rogue.Rogue, error) {
	r, err := rogue.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	addrs := c.Addrs()
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Connect(jctx, addrs...); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.Joined(jctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// rogues are the rogues of a run, closed together.
type rogues []*rogue.Rogue

func (rs *rogues) join(ctx context.Context, c *cluster.Cluster, cfg rogue.Config) (*rogue.Rogue, error) {
	r, err := join(ctx, c, cfg)
	if err == nil {
		*rs = append(*rs, r)
	}
	return r, err
}

func (rs rogues) close() {
	for _, r := range rs {
		r.Close()
	}
}

// waitListed waits until cl's view of offers lists every one of ids.
func waitListed(ctx context.Context, cl *api.Client, ids ...peer.ID) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		nodes, err := cl.Nodes(ctx)
		missing := ""
		for _, id := range ids {
			if err == nil && !slices.ContainsFunc(nodes, func(n api.Node) bool { return n.PeerID == id.String() }) {
				missing = id.String()
			}
		}
		if err == nil && missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's view never listed rogue %s (%v)", cl.Addr(), missing, err)
		}
		if err := task.Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// declaration is a job running script on gpus GPUs of model (any, if
// empty) within limit.
func declaration(name, script string, gpus int, model string, limit time.Duration) market.Declaration {
	d := market.NewDeclaration(name, []string{"sh", "-c", script}, gpus, market.Duration(limit.Milliseconds()), nil)
	d.Request.Memory = 256 * market.MiB
	d.Request.GPUModel = model
	return d
}

// submit submits d on cl and returns the job's ID.
func submit(ctx context.Context, cl *api.Client, d market.Declaration) (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	return bench.Submit(ctx, cl, raw)
}

// refused reads a node's refusals, e31_refused_total, keyed
// "PROTO CODE".
func refused(ctx context.Context, n *cluster.Node) (map[string]float64, error) {
	m, err := bench.Scrape(ctx, n.Metrics)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for series, v := range m {
		if strings.HasPrefix(series, "e31_refused_total{") && v > 0 {
			out[bench.LabelOf(series, "proto")+" "+bench.LabelOf(series, "code")] += v
		}
	}
	return out, nil
}

// metric reads one series of a node's metrics, 0 if absent.
func metric(ctx context.Context, n *cluster.Node, series string) (float64, error) {
	m, err := bench.Scrape(ctx, n.Metrics)
	if err != nil {
		return 0, err
	}
	return m[series], nil
}

// storeDir is where the rogue of an attack keeps its content, in dir.
func storeDir(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "rogue-"+name)
}

package rogue

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ProviderAttacks plays the rogue providers' attacks on c, a ProviderNet,
// whose node 0 is the victim: the honest submitter. An error says the run
// could not go on (a rogue could not join, a job could not be submitted);
// an attack that could not be carried out is named in Outcome.Errors.
func ProviderAttacks(ctx context.Context, c *cluster.Cluster, o Options) (Outcome, error) {
	o = o.withDefaults()
	out := newOutcome()
	victim := c.Nodes[0]
	sub := c.Client(0)
	var rs rogues
	defer rs.close()
	cfg := func(name string) rogue.Config { return rogueConfig(storeDir(o.Dir, name), providerEpoch, o) }

	honest, err := submitHonest(ctx, sub, 1, "H100")
	if err != nil {
		return out, err
	}

	// One rogue for each attack that needs an offer of its own (a model
	// no one else offers), one with no offer for the unassigned
	// proposals, one whose offer fits what an honest provider fits better.
	noOffer, err := rs.join(ctx, c, cfg("no-offer"))
	if err != nil {
		return out, err
	}
	byModel := map[string]*rogue.Rogue{}
	for _, m := range []string{"SHARED", "ROGUE-3", "ROGUE-5", "ROGUE-6", "ROGUE-7", "ROGUE-8"} {
		r, err := rs.join(ctx, c, cfg(m))
		if err != nil {
			return out, err
		}
		n := 1
		if m == "SHARED" {
			n = 4 // fits a 2-GPU job, worse than node 2's two
		}
		if err := r.Offer(ctx, r.GPUs(m, n, 80<<30)); err != nil {
			return out, err
		}
		byModel[m] = r
	}
	escapes, err := rs.join(ctx, c, cfg("escapes"))
	if err != nil {
		return out, err
	}
	if err := escapes.OfferEscapes(ctx); err != nil {
		return out, err
	}
	ids := []peer.ID{escapes.ID()}
	for _, r := range byModel {
		ids = append(ids, r.ID())
	}
	if err := waitListed(ctx, sub, ids...); err != nil {
		return out, err
	}
	note := func(attack, job string, r *rogue.Rogue) {
		out.Jobs[attack], out.Rogues[attack], out.Victims[attack] = job, r.ID().String(), 0
	}

	// 2b first, alone on the machine: its rogue proposes the moment the
	// declaration reaches it, well before node 2's next epoch.
	o.Log("rogue providers: %s", rogue.AttackNotAssigned)
	shared := byModel["SHARED"]
	job, err := submit(ctx, sub, declaration("shared", "echo done > /out/result", 2, "SHARED", 5*time.Minute))
	if err != nil {
		return out, err
	}
	honest = append(honest, job)
	note(rogue.AttackNotAssigned, job, shared)
	out.add(shared.NotAssigned(ctx, job))
	if err := shared.Drain(ctx); err != nil {
		return out, err
	}

	// A job no provider can take stays queued for the proposals of a rogue
	// with no offer.
	o.Log("rogue providers: %s, %s", rogue.AttackBackdated, rogue.AttackNoOffer)
	for _, a := range []struct {
		attack string
		run    func(context.Context, string) (rogue.Result, error)
	}{{rogue.AttackBackdated, noOffer.Backdated}, {rogue.AttackNoOffer, noOffer.NoOffer}} {
		job, err := submit(ctx, sub, declaration("queued", "true", 1, "NOBODY", time.Hour))
		if err != nil {
			return out, err
		}
		note(a.attack, job, noOffer)
		out.add(a.run(ctx, job))
	}

	o.Log("rogue providers: %s, %s", rogue.AttackPastLimit, rogue.AttackAfterFinal)
	r3 := byModel["ROGUE-3"]
	job, err = submit(ctx, sub, declaration("limited", "sleep 30", 1, "ROGUE-3", time.Minute))
	if err != nil {
		return out, err
	}
	note(rogue.AttackPastLimit, job, r3)
	note(rogue.AttackAfterFinal, job, r3)
	if l, err := r3.Take(ctx, job); err != nil {
		out.add(rogue.Result{Attack: rogue.AttackPastLimit}, err)
		out.add(rogue.Result{Attack: rogue.AttackAfterFinal}, err)
	} else {
		out.add(r3.PastLimit(ctx, l), nil)
		out.add(r3.AfterFinal(ctx, l))
	}

	o.Log("rogue providers: %s", rogue.AttackStage)
	r5 := byModel["ROGUE-5"]
	in, err := inputFile(o.Dir, o.InputBytes)
	if err != nil {
		return out, err
	}
	wide := declaration("wide", "true", 64, "", time.Hour)
	wide.Data = []market.Input{{Source: in, Mount: "/data/secret"}}
	job, err = submit(ctx, sub, wide)
	if err != nil {
		return out, err
	}
	note(rogue.AttackStage, job, r5)
	out.add(r5.StageUnreserved(ctx, job))

	for _, a := range []struct {
		attack, model string
		checkpoints   bool
		run           func(context.Context, *rogue.Lease) (rogue.Result, error)
	}{
		{rogue.AttackFalseCompleted, "ROGUE-6", false, byModel["ROGUE-6"].FalseCompleted},
		{rogue.AttackFalseCheckpoint, "ROGUE-7", true, byModel["ROGUE-7"].FalseCheckpointAt},
	} {
		o.Log("rogue providers: %s", a.attack)
		r := byModel[a.model]
		d := declaration(a.model, "sleep 30", 1, a.model, 5*time.Minute)
		if a.checkpoints {
			d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(time.Second.Milliseconds())}
		}
		job, err := submit(ctx, sub, d)
		if err != nil {
			return out, err
		}
		note(a.attack, job, r)
		l, err := r.Take(ctx, job)
		if err != nil {
			out.add(rogue.Result{Attack: a.attack}, err)
			continue
		}
		out.add(a.run(ctx, l))
	}

	o.Log("rogue providers: %s", rogue.AttackCheckpointFlood)
	if err := flood(ctx, c, byModel["ROGUE-8"], o, &out); err != nil {
		return out, err
	}

	if o.E31 != "" {
		o.Log("rogue providers: %s", rogue.AttackEscapes)
		note(rogue.AttackEscapes, "", escapes)
		res, printed, err := printEscapes(ctx, o.E31, victim, sub, escapes)
		out.Printed = string(printed)
		out.add(res, err)
	}

	// The honest jobs complete, whatever the rogues did.
	for _, id := range honest {
		out.Honest = append(out.Honest, waitHonest(ctx, o, sub, id))
	}
	if out.Refused[victim.Name], err = refused(ctx, victim); err != nil {
		return out, err
	}
	return out, nil
}

// flood plays the checkpoint flood on a job that declares request.disk
// o.Disk and checkpoints, and reads what the victim fetched over it.
func flood(ctx context.Context, c *cluster.Cluster, r *rogue.Rogue, o Options, out *Outcome) error {
	victim := c.Nodes[0]
	d := declaration("flooded", "sleep 120", 1, "ROGUE-8", 5*time.Minute)
	d.Request.Disk = o.Disk
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(time.Second.Milliseconds())}
	job, err := submit(ctx, c.Client(0), d)
	if err != nil {
		return err
	}
	out.Jobs[rogue.AttackCheckpointFlood], out.Rogues[rogue.AttackCheckpointFlood], out.Victims[rogue.AttackCheckpointFlood] = job, r.ID().String(), 0
	l, err := r.Take(ctx, job)
	if err != nil {
		out.add(rogue.Result{Attack: rogue.AttackCheckpointFlood}, err)
		return nil
	}
	const returned = "e31_bytes_returned_total"
	before, err := metric(ctx, victim, returned)
	if err != nil {
		return err
	}
	res, ferr := r.CheckpointFlood(ctx, l, o.Flood)
	after, err := metric(ctx, victim, returned)
	if err != nil {
		return err
	}
	out.Returned = after - before
	res.Notes = append(res.Notes, fmt.Sprintf("the submitter fetched %s (e31_bytes_returned_total)", mib(out.Returned)))
	out.add(res, ferr)
	return nil
}

// printEscapes reads `e31 nodes` on the victim, where the escape rogue's
// offer is in view, as a user would.
func printEscapes(ctx context.Context, e31 string, victim *cluster.Node, cl *api.Client, r *rogue.Rogue) (rogue.Result, []byte, error) {
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return rogue.Result{Attack: rogue.AttackEscapes}, nil, err
	}
	listed := slices.ContainsFunc(nodes, func(n api.Node) bool { return n.PeerID == r.ID().String() })
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, e31, "--api", victim.API, "nodes")
	// The token goes in the environment, which an e31 from before API
	// tokens (rogue-bench --bin) ignores where it would refuse the flag.
	if tok, err := api.ReadToken(victim.TokenFile); err == nil {
		cmd.Env = append(os.Environ(), "E31_API_TOKEN="+tok)
	}
	printed, err := cmd.Output()
	if err != nil {
		return rogue.Result{Attack: rogue.AttackEscapes}, printed, fmt.Errorf("e31 nodes: %w", err)
	}
	return rogue.Escapes(printed, listed), printed, nil
}

// inputFile writes n random bytes to a new file in dir (the system's
// temporary folder if empty) and returns its path: a job's input.
func inputFile(dir string, n int) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "rogue-input-")
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if _, err := f.Write(b); err != nil {
		return "", err
	}
	return filepath.Abs(f.Name())
}

// mib writes a byte count in MiB.
func mib(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/gangnet"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A gang's part (market.Request.Nodes) is leased as a job of its own, and
// staged as one; but it does not run until every part is held. Its
// submitter then names all the parts in one gang lease, which this
// provider signs (HandleGang) and gets back signed by every party: only
// then does the part make its private network (node/gangnet), wait for a
// link to every other part, and start its run inside that network, with
// the gang's variables set. A gang whose lease never comes within
// GangStartWithin ends this part withdrawn, the submitter's doing, which
// owes the time held for it (strikes.go counts such lapses).

// GangNet is a part's private network (gangnet.Net).
type GangNet interface {
	NetNSPath() string
	SysfsPath() string
	Interface() string
	Addr(rank int) netip.Addr
	Ready(ctx context.Context) error
	Close() error
}

// OpenGang makes a part's private network (gangnet.Registry.Open).
type OpenGang func(ctx context.Context, cfg gangnet.Config) (GangNet, error)

// Defaults of the gang's waits.
const (
	// DefaultGangStartWithin bounds the wait of a staged part for its gang
	// lease: the submitter gathers every part's lease within a few
	// proposal lifetimes, or gives the parts up itself, sooner.
	DefaultGangStartWithin = 2 * time.Minute
	// gangReadyWithin bounds the wait, once a part is staged, for a link
	// to every other part: each part's network opens when the gang lease
	// comes, while it stages, so the links are up by then but for a part
	// whose provider is in trouble.
	gangReadyWithin = time.Minute
	// gangMasterPort is MASTER_PORT, torch.distributed's rendezvous port
	// on rank 0, unless the job sets its own.
	gangMasterPort = "29500"
)

// gangPart is the gang and rank a lease's job is a part of; ok is false
// for a job that is no gang's part.
func gangPart(rec Record) (gang string, rank int, ok bool) {
	if !rec.Declaration.Request.Gang() {
		return "", 0, false
	}
	return market.SplitTaskID(rec.Lease.Terms.Job)
}

// HandleGang answers a gang's submitter: it signs the gang lease that
// names this provider's part (Start unset), or takes it signed by every
// party, which starts the part (Start set).
func (p *Provider) HandleGang(_ context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.GangRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	lr := p.leases.lookup(req.Lease)
	if lr == nil {
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("no lease %s here", req.Lease))
	}
	rec := lr.snapshot()
	t := rec.Lease.Terms
	g := req.Gang.Terms
	part, _ := g.Part(req.Lease)
	gang, rank, ok := gangPart(rec)
	switch {
	case t.Submitter != from.String() || g.Submitter != t.Submitter:
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("lease %s is not %s's", req.Lease, from))
	case !ok || gang != g.Gang || rank != part.Rank || len(g.Parts) != rec.Declaration.Request.Nodes:
		return nil, p2p.Refuse(wire.CodeDeclined, fmt.Errorf("lease %s is not part %d of a gang %s of %d parts", req.Lease, part.Rank, g.Gang, len(g.Parts)))
	case part.Provider != p.d.Self.String():
		return nil, p2p.Refuse(wire.CodeDeclined, fmt.Errorf("part %d of gang %s names provider %s, not this one", part.Rank, g.Gang, part.Provider))
	}
	if !req.Start {
		signed := req.Gang
		if err := signed.SignProvider(p.d.Key, rank); err != nil {
			return nil, err
		}
		return wire.GangReply{ProviderSig: signed.ProviderSigs[rank]}, nil
	}
	if err := req.Gang.Verify(); err != nil {
		return nil, err
	}
	lr.startGang(req.Gang)
	return struct{}{}, nil
}

// startGang hands the runner its gang lease, signed by every party; the
// first one given counts.
func (lr *leaseRunner) startGang(g wire.SignedGangLease) {
	select {
	case lr.gangStart <- g:
	default: // given already
	}
}

// gangJoin is a part's way into its gang, made while the part stages:
// the gang lease, then the part's network, opened as soon as the lease
// comes, so that the links between the parts come up while each stages
// at its own pace.
type gangJoin struct {
	*env // immutable, shared with the role
	// lease is the part's lease state, shared with its runner.
	lease *leaseState
	// submitter is the gang's; start brings the gang lease, signed by
	// every party (leaseRunner.startGang); gang and rank are the part's.
	// Immutable.
	submitter peer.ID
	start     <-chan wire.SignedGangLease
	gang      string
	rank      int

	// done is closed once net, or else end, is set, by the goroutine
	// that awaits the gang (await); they are read only after done.
	done chan struct{}
	net  GangNet
	end  *ledger.Ending
}

// openGang starts, for a gang's part, the wait for its gang lease signed
// by every party and then the making of its network, beside staging; nil
// for a job that is no gang's part. The wait is bounded by
// GangStartWithin from the lease; ctx ends it sooner.
func (lr *leaseRunner) openGang(ctx context.Context) *gangJoin {
	rec := lr.snapshot()
	gang, rank, ok := gangPart(rec)
	if !ok {
		return nil
	}
	j := &gangJoin{env: lr.env, lease: &lr.leaseState, submitter: lr.submitter, start: lr.gangStart,
		gang: gang, rank: rank, done: make(chan struct{})}
	go lr.guarded("gang", func() {
		defer close(j.done)
		j.net, j.end = j.await(ctx, rec.Lease.Terms)
	})
	return j
}

// await waits for the gang lease and makes the part's network; it
// returns the network, or how the lease ends.
func (j *gangJoin) await(ctx context.Context, t wire.LeaseTerms) (GangNet, *ledger.Ending) {
	gang, rank := j.gang, j.rank
	within := j.cfg.GangStartWithin
	if within <= 0 {
		within = DefaultGangStartWithin
	}
	wait := time.NewTimer(within)
	defer wait.Stop()
	var g wire.SignedGangLease
	select {
	case g = <-j.start:
	case <-wait.C:
		// The GPUs were held for the submitter's gang, which it never
		// completed: the time is its own (it avoids a part's provider
		// that would not sign), and a submitter whose gangs keep lapsing
		// gets no more gang parts from here for a while (strikes.go).
		j.strikes.gangLapsed(j.submitter, gang)
		return nil, &ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter,
			Reason: fmt.Sprintf("gang %s never started: its gang lease did not come within %s", gang, within)}
	case <-ctx.Done():
		e := stoppedBeforeRun(ctx, "before its gang started")
		return nil, &e
	}
	j.lease.change(func(r *Record) { r.Gang = &g })
	j.strikes.gangStartedBy(j.submitter)
	if j.d.OpenGang == nil {
		return nil, &ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: "this provider cannot make a gang's network"}
	}
	cfg := gangnet.Config{Gang: gang, Lease: t.ID, Self: rank}
	for _, part := range g.Terms.Parts {
		id, err := peer.Decode(part.Provider)
		if err != nil {
			return nil, &ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionSubmitter, Reason: "gang lease names a bad provider: " + err.Error()}
		}
		cfg.Members = append(cfg.Members, gangnet.Member{Rank: part.Rank, Peer: id})
	}
	n, err := j.d.OpenGang(ctx, cfg)
	if err != nil {
		j.log.Warn("gang network", "lease", t.ID, "err", err)
		return nil, &ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: "gang network: " + err.Error()}
	}
	return n, nil
}

// join waits, once the part is staged, for its gang lease and network
// (openGang), then for a link to every other part; the run then starts
// inside that network (st.net). It reports whether the run may start;
// when not, it has recorded how the lease ended. A job that is no gang's
// part (j nil) starts at once.
func (j *gangJoin) join(ctx context.Context, st *staged) bool {
	if j == nil {
		return true
	}
	rec := j.lease.snapshot()
	log := j.log.With("lease", rec.ID(), "job", rec.Lease.Terms.Job)
	select {
	case <-j.done:
	case <-ctx.Done():
		j.lease.end(stoppedBeforeRun(ctx, "before its gang started"))
		return false
	}
	if j.end != nil {
		j.lease.end(*j.end)
		return false
	}
	st.net = j.net
	rctx, cancel := context.WithTimeout(ctx, gangReadyWithin)
	defer cancel()
	if err := j.net.Ready(rctx); err != nil {
		if ctx.Err() != nil {
			j.lease.end(stoppedBeforeRun(ctx, "before its gang's network was up"))
			return false
		}
		j.lease.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionNetwork,
			Reason: fmt.Sprintf("gang network: no link to every other part within %s of staging: %v", gangReadyWithin, err)})
		return false
	}
	g := j.lease.snapshot().Gang
	st.env = gangEnv(j.net, len(g.Terms.Parts), rec.Declaration.Work.Env)
	log.Info("gang started", "gang", j.gang, "rank", j.rank, "parts", len(g.Terms.Parts), "addr", j.net.Addr(j.rank))
	return true
}

// gangEnv is what a part sees of its gang, besides its rank
// (market.Declaration.Task): every part's address, and torch.distributed's
// and its backends' conventions for them. A MASTER_PORT the job sets is
// kept.
func gangEnv(n GangNet, parts int, own map[string]string) map[string]string {
	addrs := make([]string, parts)
	for r := range parts {
		addrs[r] = n.Addr(r).String()
	}
	env := map[string]string{
		"E31_NODE_ADDRS":     strings.Join(addrs, "\n"),
		"MASTER_ADDR":        addrs[0],
		"MASTER_PORT":        gangMasterPort,
		"GLOO_SOCKET_IFNAME": n.Interface(),
		"NCCL_SOCKET_IFNAME": n.Interface(),
		"TP_SOCKET_IFNAME":   n.Interface(),
	}
	if p, ok := own["MASTER_PORT"]; ok {
		if _, err := strconv.Atoi(p); err == nil {
			env["MASTER_PORT"] = p
		}
	}
	return env
}

// stoppedBeforeRun is how a lease ends that its context stopped before
// the run: as its cause says, as staging says it (stage).
func stoppedBeforeRun(ctx context.Context, when string) ledger.Ending {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrWithdrawn):
		return ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter, Reason: "withdrawn " + when}
	case errors.Is(cause, ErrReleasedUnrun):
		return ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: ErrReleasedUnrun.Error()}
	case errors.Is(cause, ErrPreempted):
		return ledger.Ending{Outcome: ledger.OutcomePreempted, Attribution: ledger.AttributionProvider, Reason: cause.Error() + " (" + when + ")"}
	}
	return ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: "provider stopped " + when}
}

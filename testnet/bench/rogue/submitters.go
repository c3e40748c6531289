package rogue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
)

// SubmitterAttacks plays, on c, a SubmitterNet, the rogue submitters'
// attacks on the honest providers (nodes 1 and 2), and the squat of an
// honest gang's part on the honest submitter (node 0), all at once. An
// error says the run could not go on; an attack that could not be
// carried out is named in Outcome.Errors.
func SubmitterAttacks(ctx context.Context, c *cluster.Cluster, o Options) (Outcome, error) {
	o = o.withDefaults()
	out := newOutcome()
	sub := c.Client(0)
	var rs rogues
	defer rs.close()
	cfg := func(name string) rogue.Config {
		return rogueConfig(storeDir(o.Dir, name), 250*time.Millisecond, o)
	}

	// Two GPUs each: more than the squatter offers, so that none is ever
	// assigned to it.
	honest, err := submitHonest(ctx, sub, 2, "GANG")
	if err != nil {
		return out, err
	}

	squatter, err := rs.join(ctx, c, cfg("squatter"))
	if err != nil {
		return out, err
	}
	// One GPU of the gang's model: for a part of one GPU, the best fit of
	// every Match, ahead of the honest providers' two.
	if err := squatter.Offer(ctx, squatter.GPUs("GANG", 1, 80<<30)); err != nil {
		return out, err
	}
	if err := waitListed(ctx, sub, squatter.ID()); err != nil {
		return out, err
	}
	refuser, err := rs.join(ctx, c, cfg("refuser"))
	if err != nil {
		return out, err
	}
	withholder, err := rs.join(ctx, c, cfg("withholder"))
	if err != nil {
		return out, err
	}

	gd := declaration("gang", "echo done > /out/result", 1, "GANG", 2*time.Minute)
	gd.Request.Nodes = 2
	gang, err := submit(ctx, sub, gd)
	if err != nil {
		return out, err
	}
	honest = append(honest, gang)
	out.Jobs[rogue.AttackGangSquat], out.Rogues[rogue.AttackGangSquat], out.Victims[rogue.AttackGangSquat] = gang, squatter.ID().String(), 0
	out.Rogues[rogue.AttackNoCountersign] = refuser.ID().String()
	out.Rogues[rogue.AttackGangWithheld] = withholder.ID().String()

	var mu sync.Mutex // guards results
	results := map[string]struct {
		res rogue.Result
		err error
	}{}
	keep := func(res rogue.Result, err error) {
		mu.Lock()
		results[res.Attack] = struct {
			res rogue.Result
			err error
		}{res, err}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		o.Log("rogue submitters: %s", rogue.AttackGangSquat)
		res, err := squatter.SquatGangPart(ctx, gang, 0, rogue.SquatOptions{Rounds: o.SquatRounds})
		// Whatever came of it, the squatter takes nothing more: the gang
		// may go on without it.
		if derr := squatter.Drain(ctx); err == nil {
			err = derr
		}
		keep(res, err)
	})
	wg.Go(func() {
		o.Log("rogue submitters: %s", rogue.AttackNoCountersign)
		// SOLO: node 1 alone offers it, so that the provider that struck
		// the rogue is the one its probe must go to.
		keep(refuser.NeverCountersign(ctx, rogue.NoCountersignOptions{
			Job:   declaration("unpaid", "sleep 30; echo done > /out/result", 1, "SOLO", 2*time.Minute),
			Probe: declaration("probe", "true", 1, "SOLO", time.Minute),
		}))
	})
	wg.Go(func() {
		o.Log("rogue submitters: %s", rogue.AttackGangWithheld)
		g := declaration("unstarted", "echo done > /out/result", 1, "PAIR", 2*time.Minute)
		g.Request.Nodes = 2
		keep(withholder.WithholdGangLease(ctx, rogue.WithholdOptions{Gang: g, Rounds: o.GangRounds, Within: o.GangWithin}))
	})
	wg.Wait()
	for _, a := range []string{rogue.AttackNoCountersign, rogue.AttackGangSquat, rogue.AttackGangWithheld} {
		out.add(results[a].res, results[a].err)
	}

	// The refuser's job and the withholder's gang went to honest
	// providers: their victims.
	for _, a := range []struct {
		attack string
		r      *rogue.Rogue
	}{{rogue.AttackNoCountersign, refuser}, {rogue.AttackGangWithheld, withholder}} {
		out.Victims[a.attack] = -1
		for _, j := range a.r.Declared() {
			out.Jobs[a.attack] = j
			for _, l := range a.r.Leases(j) {
				out.Victims[a.attack] = nodeOf(c, l.Lease.Terms.Provider)
			}
			for i := range 2 {
				for _, l := range a.r.Leases(market.TaskID(j, i)) {
					out.Victims[a.attack] = nodeOf(c, l.Lease.Terms.Provider)
				}
			}
			break
		}
	}
	if v := out.Victims[rogue.AttackNoCountersign]; v >= 0 {
		var raw json.RawMessage
		if err := c.Client(v).Do(ctx, "GET", "/v1/peers", nil, nil, &raw); err != nil {
			return out, err
		}
		out.Strikes = string(raw)
		if r, ok := out.Result(rogue.AttackNoCountersign); ok {
			if why, struck := Struck(raw, refuser.ID().String()); struck {
				r.Notes = append(r.Notes, "struck by its provider: "+why)
			} else {
				r.Notes = append(r.Notes, "not struck by its provider (GET /v1/peers)")
			}
			out.replace(r)
		}
	}

	for _, id := range honest {
		j := waitHonest(ctx, o, sub, id)
		out.Honest = append(out.Honest, j)
		if id == gang {
			part, err := sub.Job(ctx, market.TaskID(gang, 0))
			if err != nil {
				return out, err
			}
			if r, ok := out.Result(rogue.AttackGangSquat); ok {
				r.Notes = append(r.Notes, gangEnd(j, part, squatter.ID().String()))
				out.replace(r)
			}
		}
	}
	for _, n := range c.Nodes {
		if out.Refused[n.Name], err = refused(ctx, n); err != nil {
			return out, err
		}
	}
	return out, nil
}

// gangEnd says how the squatted gang ended: whether a part ran on the
// squatter, and whether the squatted part's avoid list names it.
func gangEnd(gang, part api.Job, squatter string) string {
	s := fmt.Sprintf("the gang %s %s", gang.State, gang.Outcome)
	for _, p := range gang.Parts {
		if p.Provider == squatter {
			s += ", part " + fmt.Sprint(p.Rank) + " on the squatter"
		}
	}
	if slices.Contains(part.Avoid, squatter) {
		return s + ", the squatter in part 0's avoid list"
	}
	return s + ", the squatter in no avoid list of part 0"
}

// replace puts r in place of the result of the same attack.
func (o *Outcome) replace(r rogue.Result) {
	for i := range o.Results {
		if o.Results[i].Attack == r.Attack {
			o.Results[i] = r
		}
	}
}

// nodeOf is the index of the node with peer ID id, -1 if none.
func nodeOf(c *cluster.Cluster, id string) int {
	for i, n := range c.Nodes {
		if n.PeerID == id {
			return i
		}
	}
	return -1
}

// Struck reports whether a node's GET /v1/peers says it struck off the
// peer id, and what it says of it: an entry naming id that a field about
// strikes ("strike…", "struck…") holds or sits beside.
func Struck(raw json.RawMessage, id string) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return struckIn(v, id, false)
}

func struckIn(v any, id string, under bool) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		names := false
		strikeKey := under
		for k, f := range x {
			if s, ok := f.(string); ok && s == id {
				names = true
			}
			if isStrikeKey(k) && !empty(f) {
				strikeKey = true
			}
		}
		if names && strikeKey {
			b, _ := json.Marshal(x)
			return string(b), true
		}
		for k, f := range x {
			if why, ok := struckIn(f, id, under || isStrikeKey(k)); ok {
				return why, true
			}
		}
	case []any:
		for _, f := range x {
			if why, ok := struckIn(f, id, under); ok {
				return why, true
			}
		}
	}
	return "", false
}

func isStrikeKey(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "strike") || strings.Contains(k, "struck")
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

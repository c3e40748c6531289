package flood

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// HoardConfig configures Hoard; zero values take the defaults noted.
type HoardConfig struct {
	// Identities is how many fresh identities declare; default 20.
	Identities int
	// Singles is how many single jobs each declares; default 10,000, the
	// most one submitter may hold open in a view. Big of them are of the
	// largest size a requeue carries, each shaped to cost a view the most
	// heap per byte (thousands of tiny env entries); default 20.
	Singles int
	Big     int
	// Tasks is how many array tasks each declares, in arrays of
	// ArrayTasks; defaults market.MaxArrayTasks (the most one submitter
	// may hold open) and 10,000.
	Tasks      int
	ArrayTasks int
	// Rate is the messages published a second; default 90, under what a
	// daemon takes from one peer (p2p.DefaultLimits).
	Rate float64
	// Rounds is how many times everything is announced: the first round
	// declares, the others re-announce (as a submitter's requeue does,
	// each in a fresh message), so that jobs do not go stale in the views
	// before the last identity's have arrived; 0: until ctx ends.
	Rounds int
	// OnRound, if set, is called after each round with what was
	// published so far.
	OnRound func(Hoarded)
}

func (c HoardConfig) withDefaults() HoardConfig {
	if c.Identities <= 0 {
		c.Identities = 20
	}
	if c.Singles <= 0 {
		c.Singles = 10_000
	}
	if c.Big < 0 || c.Big > c.Singles {
		c.Big = min(max(c.Big, 0), c.Singles)
	} else if c.Big == 0 {
		c.Big = min(20, c.Singles)
	}
	if c.Tasks <= 0 {
		c.Tasks = market.MaxArrayTasks
	}
	if c.ArrayTasks <= 0 {
		c.ArrayTasks = 10_000
	}
	if c.Rate <= 0 {
		c.Rate = 90
	}
	return c
}

// Hoarded is what Hoard declared, per round.
type Hoarded struct {
	Identities int `json:"identities"`
	Singles    int `json:"singles"`
	Big        int `json:"big"`
	Arrays     int `json:"arrays"`
	Tasks      int `json:"tasks"`
	// Bytes is the signed declarations' bytes, all identities together.
	Bytes int64 `json:"declaration_bytes"`
	// Messages counts the requeue messages published, Rounds the rounds
	// finished.
	Messages int `json:"messages"`
	Rounds   int `json:"rounds"`
}

// hoarder is one identity's declarations.
type hoarder struct {
	key     crypto.PrivKey
	batches [][][]byte // requeue bodies, arrays first
}

// Hoard floods the views' bounds (node/view, "Bounds"): fresh identities,
// each declaring as much as one submitter may hold in a view, single
// jobs and arrays both, every declaration valid and every identity
// unreachable (no address). Each identity's declarations travel in
// requeue messages it signs, as many as fit in each, one identity after
// the other, so that the gossip's bound on new submitters per peer (one a
// second, p2p.DefaultNewSubmitters) admits each as it starts. It returns
// what one round declared and how many rounds it finished; ctx ending is
// not an error.
func (p *Peer) Hoard(ctx context.Context, c HoardConfig) (Hoarded, error) {
	c = c.withDefaults()
	pad, err := bigPadding(p.label)
	if err != nil {
		return Hoarded{}, err
	}
	out := Hoarded{Identities: c.Identities}
	tick := time.NewTicker(time.Duration(float64(time.Second) / c.Rate))
	defer tick.Stop()
	hoarders := make([]hoarder, c.Identities)
	for c.Rounds == 0 || out.Rounds < c.Rounds {
		for k := range hoarders {
			if hoarders[k].key == nil {
				// Each identity's declarations are signed as its turn
				// comes: the first round starts at once.
				if hoarders[k], err = p.hoarder(c, k, pad, &out); err != nil {
					return out, err
				}
			}
			for _, b := range hoarders[k].batches {
				select {
				case <-ctx.Done():
					return out, nil
				case <-tick.C:
				}
				s, err := p2p.Seal(hoarders[k].key, wire.KindRequeue, wire.RequeueBody{Declarations: b}, time.Now())
				if err != nil {
					return out, err
				}
				if err := p.topics[p2p.TopicJobs].Publish(ctx, s.Raw); err != nil {
					if ctx.Err() != nil {
						return out, nil
					}
					return out, fmt.Errorf("flood: publish a requeue: %w", err)
				}
				out.Messages++
			}
		}
		out.Rounds++
		if c.OnRound != nil {
			c.OnRound(out)
		}
	}
	return out, nil
}

// hoarder makes identity k of c and signs its declarations, counting them
// into out; pad is the env of its largest declarations.
func (p *Peer) hoarder(c HoardConfig, k int, pad map[string]string, out *Hoarded) (hoarder, error) {
	now := time.Now()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return hoarder{}, err
	}
	var envs [][]byte
	add := func(d market.Declaration) error {
		s, err := p2p.Seal(key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, now)
		if err != nil {
			return err
		}
		envs = append(envs, s.Raw)
		out.Bytes += int64(len(s.Raw))
		return nil
	}
	for left, a := c.Tasks, 0; left > 0; a++ {
		d := hoardDeclaration(fmt.Sprintf("%s-%02d-array-%03d", p.label, k, a))
		d.Array = &market.Array{Count: min(left, c.ArrayTasks)}
		if err := add(d); err != nil {
			return hoarder{}, err
		}
		left -= d.Array.Count
		out.Arrays++
		out.Tasks += d.Array.Count
	}
	for i := range c.Singles {
		d := hoardDeclaration(fmt.Sprintf("%s-%02d-%05d", p.label, k, i))
		if i < c.Big {
			d.Work.Env = pad
			out.Big++
		}
		if err := add(d); err != nil {
			return hoarder{}, err
		}
		out.Singles++
	}
	batches, tooLarge := wire.RequeueBatches(envs)
	if len(tooLarge) > 0 {
		return hoarder{}, errors.New("flood: a declaration too large for a requeue")
	}
	return hoarder{key: key, batches: batches}, nil
}

// hoardDeclaration is a trivial job named name, as a Sybil declares it.
func hoardDeclaration(name string) market.Declaration {
	d := market.NewDeclaration(name, []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	d.Request.Memory = 64 * market.MiB
	return d
}

// bigPadding is the env that brings a hoard declaration's envelope as
// near as it goes to wire.MaxDeclarationEnvelope, the largest a requeue
// carries: tiny entries, each costing a view's heap several times its
// bytes.
func bigPadding(label string) (map[string]string, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	env := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("K%x", i)] = ""
		}
		return m
	}
	fits := func(n int) bool {
		d := hoardDeclaration(fmt.Sprintf("%s-%02d-%05d", label, 0, 0))
		d.Work.Env = env(n)
		s, err := p2p.Seal(key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, time.Now())
		// A little short: a signature's nonce and time vary in length.
		return err == nil && d.Validate() == nil && len(s.Raw) <= wire.MaxDeclarationEnvelope-64
	}
	lo, hi := 0, wire.MaxDeclarationEnvelope
	for lo < hi {
		if mid := (lo + hi + 1) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return env(lo), nil
}

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/cluster"
)

// StartNetwork starts a cluster and waits until every view holds every
// offer; the caller stops it.
func StartNetwork(ctx context.Context, opts cluster.Options) (*cluster.Cluster, error) {
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if err := c.WaitConverged(wctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%d nodes did not converge in 120s: %w", len(c.Nodes), err)
	}
	return c, nil
}

// WaitIdle waits until no node's view shows a held GPU, so that the next
// figure starts from a network with all its compute free.
func WaitIdle(ctx context.Context, c *cluster.Cluster, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		held := 0
		for i := range c.Nodes {
			view, err := c.Client(i).Nodes(ctx)
			if err != nil {
				return err
			}
			for _, p := range view {
				for _, g := range p.GPUs {
					if !g.Free {
						held++
					}
				}
			}
		}
		if held == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("views still show %d GPUs held %s after the last release", held, limit)
		}
		if err := task.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// Submit submits a declaration (such as TrivialJob's) on cl and returns
// the job's ID.
func Submit(ctx context.Context, cl *api.Client, decl []byte) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	j, err := cl.Submit(sctx, api.SubmitRequest{Declaration: decl}, nil)
	if err != nil {
		return "", fmt.Errorf("submit on %s: %w", cl.Addr(), err)
	}
	return j.ID, nil
}

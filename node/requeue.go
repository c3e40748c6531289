package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/p2p"
)

// kindRequeue re-announces a submitter's queued jobs: the original signed
// declarations, wrapped. A declaration's own envelope is too old to gossip
// again after a few minutes (validators refuse stale messages), yet a peer
// that joined or restarted since must still learn of the job.
const kindRequeue = "requeue"

// requeueBody carries signed declaration envelopes, each its own evidence.
type requeueBody struct {
	Declarations [][]byte `json:"declarations"`
}

// requeueBudget keeps a requeue message well under the gossip size limit.
const requeueBudget = p2p.MaxPayload * 3 / 4

// requeueEvery is how many heartbeats pass between re-announcements.
const requeueEvery = 3

// checkRequeue verifies every wrapped declaration: signed by the wrapper's
// signer, and valid.
func checkRequeue(s p2p.Signed) ([]p2p.Signed, error) {
	var b requeueBody
	if err := s.Decode(&b); err != nil {
		return nil, err
	}
	if len(b.Declarations) == 0 {
		return nil, errors.New("requeue carries no declaration")
	}
	out := make([]p2p.Signed, 0, len(b.Declarations))
	for i, raw := range b.Declarations {
		inner, err := p2p.Open(raw)
		if err != nil {
			return nil, fmt.Errorf("requeue declarations[%d]: %w", i, err)
		}
		if inner.Signer != s.Signer {
			return nil, fmt.Errorf("%w: requeue by %s carries a declaration signed by %s", p2p.ErrForged, s.Signer, inner.Signer)
		}
		if inner.Message.Kind != kindDeclaration {
			return nil, fmt.Errorf("requeue declarations[%d] is a %q", i, inner.Message.Kind)
		}
		var db declarationBody
		if err := inner.Decode(&db); err != nil {
			return nil, err
		}
		if err := db.check(); err != nil {
			return nil, fmt.Errorf("requeue declarations[%d]: %w", i, err)
		}
		out = append(out, inner)
	}
	return out, nil
}

// requeueLoop re-announces this node's queued jobs every few heartbeats.
func (n *Node) requeueLoop(ctx context.Context) {
	t := time.NewTicker(requeueEvery * n.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		var batches [][][]byte
		var cur [][]byte
		size := 0
		for _, j := range n.jobs {
			if j.State != stateQueued {
				continue
			}
			if size+len(j.Envelope) > requeueBudget && len(cur) > 0 {
				batches = append(batches, cur)
				cur, size = nil, 0
			}
			cur = append(cur, j.Envelope)
			size += len(j.Envelope) + 8
		}
		if len(cur) > 0 {
			batches = append(batches, cur)
		}
		n.mu.Unlock()
		for _, b := range batches {
			if _, err := n.gossip.Publish(ctx, p2p.TopicJobs, kindRequeue, requeueBody{Declarations: b}); err != nil && ctx.Err() == nil {
				n.log.Warn("re-announce queued jobs", "err", err)
			}
		}
	}
}

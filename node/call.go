package node

import (
	"context"
	"encoding/json"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// caller sends direct-stream requests for the roles. A call to this node
// itself (a provider leasing to its own submitter) takes the same handler
// without a dial: libp2p refuses to dial itself.
type caller struct{ n *Node }

// Call sends req to a peer's handler of proto and decodes its reply.
func (c caller) Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error {
	n := c.n
	if to != n.self {
		return p2p.Call(ctx, n.host, to, proto, req, resp)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	out, err := n.tracked(proto, n.handlers[proto])(ctx, n.self, b)
	if err != nil {
		return &p2p.RemoteError{Code: p2p.RefusalCode(err), Msg: err.Error()}
	}
	if resp == nil {
		return nil
	}
	ob, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return p2p.DecodeStrict(ob, resp)
}

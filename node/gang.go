package node

import (
	"context"

	"github.com/e31network/e31/node/gangnet"
	"github.com/e31network/e31/node/provider"
)

// openGang is how the provider makes a gang part's private network, over
// this node's host (node/gangnet); nil where the node runs no sandbox, so
// proposes for no part.
func (n *Node) openGang() provider.OpenGang {
	if n.gangs == nil {
		return nil
	}
	return func(ctx context.Context, cfg gangnet.Config) (provider.GangNet, error) {
		return n.gangs.Open(ctx, cfg)
	}
}

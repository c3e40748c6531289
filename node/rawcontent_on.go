//go:build byzantine

package node

import (
	"context"
	"io"

	"github.com/e31network/e31/node/rawcontent"
	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
)

// rawContentBuilt: this build can play a hostile submitter
// (Config.RawContent, node/rawcontent).
const rawContentBuilt = true

// submitterStore is the store the submitter works through: the node's own,
// or with RawContent one that pins a debug CAR's root for a job even when
// its DAG is incomplete (node/rawcontent).
func (n *Node) submitterStore() submitter.Store {
	if !n.cfg.RawContent {
		return n.store
	}
	return rawcontent.Store(n.store)
}

// submitterImages is the image library the submitter imports work.image
// with: the node's own, or with RawContent one that takes a debug CAR's
// root as an image without loading it.
func (n *Node) submitterImages() submitter.Images {
	if !n.cfg.RawContent {
		return n.images
	}
	return rawcontent.Images(n.images, n.store)
}

// debugCAR is what serves POST /v1/debug/car (apiserver.Config.PutCAR)
// with RawContent: the CAR's blocks stored as they are; nil without.
func (n *Node) debugCAR() func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
	if !n.cfg.RawContent {
		return nil
	}
	return func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
		return rawcontent.PutCAR(ctx, n.store, n.log, car)
	}
}

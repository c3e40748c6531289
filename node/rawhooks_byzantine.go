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
func (r rawHooks) submitterStore() submitter.Store {
	if !r.on {
		return r.store
	}
	return rawcontent.Store(r.store)
}

// submitterImages is the image library the submitter imports work.image
// with: the node's own, or with RawContent one that takes a debug CAR's
// root as an image without loading it.
func (r rawHooks) submitterImages() submitter.Images {
	if !r.on {
		return r.images
	}
	return rawcontent.Images(r.images, r.store)
}

// debugCAR is what serves POST /v1/debug/car (apiserver.Config.PutCAR)
// with RawContent: the CAR's blocks stored as they are; nil without.
func (r rawHooks) debugCAR() func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
	if !r.on {
		return nil
	}
	return func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
		return rawcontent.PutCAR(ctx, r.store, r.log, car)
	}
}

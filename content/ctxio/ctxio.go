// Package ctxio holds the I/O that ends with a context: a long copy of
// content (hashing a blob, unpacking a layer) stops at its next read once
// its context ends. It imports nothing of the project, so that a leaf
// package such as exec/layers can use it without the content store.
package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader of r that fails with ctx's error once ctx
// ends, checked before each Read, so that a long copy of content (hashing
// a blob, unpacking a layer) stops at its next read. A Read already waiting
// on r is not interrupted; the errors of r are passed on as they are.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return ctxReader{ctx, r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

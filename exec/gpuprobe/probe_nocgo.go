//go:build !cgo

package gpuprobe

import (
	"context"
	"errors"
)

// probe fails: the driver's library is opened with dlopen, which a binary
// built without cgo cannot call.
func probe(context.Context, string) (Report, error) {
	return Report{}, errors.New("this binary was built without cgo, which loading libcuda.so.1 needs (rebuild with CGO_ENABLED=1)")
}

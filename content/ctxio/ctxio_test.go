package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A read after the context ends fails with its error, before touching the
// source; until then reads and the source's errors pass through unchanged.
func TestReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "abc" {
		t.Fatalf("read %d %q, %v", n, p[:n], err)
	}
	cancel()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("read %d after cancel, %v", n, err)
	}

	broken := errors.New("disk gone")
	if _, err := Reader(context.Background(), iotest.ErrReader(broken)).Read(p); err != broken {
		t.Fatalf("source's error came back as %v", err)
	}
	b, err := io.ReadAll(Reader(context.Background(), strings.NewReader("xyz")))
	if err != nil || string(b) != "xyz" {
		t.Fatalf("ReadAll: %q, %v", b, err)
	}
}

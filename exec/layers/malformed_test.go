package layers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestUnpackMarksMalformedLayers: bytes that are not a layer are the
// layer's fault (ErrMalformed); a failing reader underneath is not.
func TestUnpackMarksMalformedLayers(t *testing.T) {
	requireRoot(t)
	honest := buildTar(t, file("a", strings.Repeat("x", 4096)), file("b", "y"))
	gz := gzipped(t, honest)
	corrupt := bytes.Clone(gz)
	corrupt[len(corrupt)/2] ^= 0xff
	cases := []struct {
		name string
		blob []byte
		want error
	}{
		{"not a tar", bytes.Repeat([]byte("not a tar "), 200), ErrMalformed},
		{"truncated inside a file", honest[:1024], ErrMalformed},
		{"truncated gzip", gz[:len(gz)/2], ErrMalformed},
		{"corrupt gzip", corrupt, ErrMalformed},
		{"gzip magic then garbage", append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte{7}, 100)...), ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unpack(context.Background(), bytes.NewReader(tc.blob), t.TempDir(), UnpackOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("a failing source is not the layer's fault", func(t *testing.T) {
		errStore := errors.New("store: disk on fire")
		r := io.MultiReader(bytes.NewReader(honest[:1024]), errReader{errStore})
		_, err := Unpack(context.Background(), r, t.TempDir(), UnpackOptions{})
		if !errors.Is(err, errStore) || errors.Is(err, ErrMalformed) {
			t.Fatalf("err %v: want the store's error, not ErrMalformed", err)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

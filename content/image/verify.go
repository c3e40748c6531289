package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// verifyingReader passes a blob through, hashing it, and turns EOF into
// ErrDigestMismatch when the bytes or their number are not what the
// descriptor says. It never reads past the declared size, so a source that
// sends more cannot make us store more.
type verifyingReader struct {
	r    io.Reader
	c    io.Closer
	h    hash.Hash
	want v1.Hash
	size int64
	n    int64
	err  error // sticky
}

// verified wraps rc so that reading it to EOF checks it against digest and
// size. Only sha256 digests are accepted.
func verified(rc io.ReadCloser, digest v1.Hash, size int64) (io.ReadCloser, error) {
	if err := checkDigest(digest); err != nil {
		rc.Close()
		return nil, err
	}
	// One byte more than the size, so that an oversized blob is noticed.
	return &verifyingReader{r: io.LimitReader(rc, size+1), c: rc, h: sha256.New(), want: digest, size: size}, nil
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	if v.n > v.size {
		v.err = fmt.Errorf("%w: %s has more than its %d bytes", ErrDigestMismatch, v.want, v.size)
		return 0, v.err
	}
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if v.n != v.size {
			v.err = fmt.Errorf("%w: %s has %d bytes, want %d", ErrDigestMismatch, v.want, v.n, v.size)
			return n, v.err
		}
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.Hex {
			v.err = fmt.Errorf("%w: %s hashes to sha256:%s", ErrDigestMismatch, v.want, got)
			return n, v.err
		}
		v.err = io.EOF
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.c.Close() }

// readVerified reads a whole small blob (index, manifest, config) and
// checks it.
func readVerified(rc io.ReadCloser, d v1.Descriptor, limit int64) ([]byte, error) {
	if d.Size < 0 || d.Size > limit {
		rc.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d allowed for a %s", ErrInvalid, d.Digest, d.Size, limit, kindOf(d.MediaType))
	}
	vr, err := verified(rc, d.Digest, d.Size)
	if err != nil {
		return nil, err
	}
	defer vr.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, vr); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkBytes checks bytes already in memory against a digest.
func checkBytes(b []byte, d v1.Hash) error {
	if err := checkDigest(d); err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != d.Hex {
		return fmt.Errorf("%w: %s hashes to sha256:%s", ErrDigestMismatch, d, got)
	}
	return nil
}

func checkDigest(d v1.Hash) error {
	if d.Algorithm != "sha256" || len(d.Hex) != 64 {
		return fmt.Errorf("%w: digest %q: only sha256 is accepted", ErrInvalid, d)
	}
	if _, err := hex.DecodeString(d.Hex); err != nil || d.Hex != lowerHex(d.Hex) {
		return fmt.Errorf("%w: digest %q is not lower-case hex", ErrInvalid, d)
	}
	return nil
}

func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func sha256Of(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

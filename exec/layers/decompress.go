package layers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is how a layer blob is compressed.
type Compression int

const (
	// Plain is an uncompressed tar stream.
	Plain Compression = iota
	// Gzip is a gzip stream (RFC 1952), possibly several concatenated.
	Gzip
	// Zstd is a Zstandard stream (RFC 8878).
	Zstd
)

func (c Compression) String() string {
	switch c {
	case Gzip:
		return "gzip"
	case Zstd:
		return "zstd"
	default:
		return "plain"
	}
}

// ErrMediaType is returned for a layer whose media type names something
// other than a plain, gzip or zstd tar (an encrypted layer, say), or whose
// media type and content disagree.
var ErrMediaType = errors.New("unsupported layer media type")

// zstdMaxWindow bounds the memory a hostile zstd frame can make the decoder
// allocate; 128 MiB is four times the window zstd -19 uses, and well above
// what image tools write (8 MiB by default).
const zstdMaxWindow = 128 << 20

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// compressionOf maps a layer media type to what it says about compression.
// ok is false when the media type says nothing (empty) and the bytes
// decide alone.
func compressionOf(mediaType string) (c Compression, ok bool, err error) {
	// Docker's "…rootfs.diff.tar.gzip" and OCI's "…tar+gzip" (including the
	// nondistributable variants) are both in use.
	mt := strings.TrimSpace(mediaType)
	switch {
	case mt == "":
		return Plain, false, nil
	case strings.HasSuffix(mt, "+gzip") || strings.HasSuffix(mt, ".tar.gzip"):
		return Gzip, true, nil
	case strings.HasSuffix(mt, "+zstd"):
		return Zstd, true, nil
	case strings.HasSuffix(mt, ".tar") || strings.HasSuffix(mt, "rootfs.diff.tar"):
		return Plain, true, nil
	}
	return Plain, false, fmt.Errorf("%w: %q", ErrMediaType, mediaType)
}

// Decompress returns the tar stream inside a layer blob. The compression is
// detected from the first bytes; mediaType, when not empty, must agree with
// them. The caller closes the result; closing does not close r.
func Decompress(r io.Reader, mediaType string) (io.ReadCloser, Compression, error) {
	declared, haveDeclared, err := compressionOf(mediaType)
	if err != nil {
		return nil, Plain, err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, Plain, fmt.Errorf("read layer header: %w", err)
	}
	found := Plain
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		found = Gzip
	case bytes.HasPrefix(head, zstdMagic):
		found = Zstd
	}
	if haveDeclared && declared != found {
		return nil, Plain, fmt.Errorf("%w: media type %q says %s but the content is %s", ErrMediaType, mediaType, declared, found)
	}
	switch found {
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, found, fmt.Errorf("gzip: %w", err)
		}
		return zr, found, nil
	case Zstd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, found, fmt.Errorf("zstd: %w", err)
		}
		return zstdCloser{zr}, found, nil
	}
	return io.NopCloser(br), found, nil
}

// zstdCloser adapts zstd.Decoder, whose Close returns nothing.
type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }

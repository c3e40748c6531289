package market

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
)

// Datum is one content root: an input or image a job reads, with the bytes
// its declaration records, or a root a provider holds, with its size.
type Datum struct {
	Root string `json:"root"` // CID
	Size uint64 `json:"size"` // bytes of the DAG
}

// Holdings is what a provider says it has cached of the large content jobs
// read: its largest roots listed with their sizes, and a Bloom filter of the
// rest. See the package documentation (Data gravity) for the sizes chosen.
type Holdings struct {
	// Roots are the largest roots held, at most MaxHeldRoots, sorted by root.
	Roots []Datum `json:"roots,omitempty"`
	// Bloom holds the rest, in the binary form of
	// github.com/bits-and-blooms/bloom/v3 (MarshalBinary), keyed by the
	// root's CID string. Empty when every root is listed.
	Bloom []byte `json:"bloom,omitempty"`
}

// Bounds of Holdings. The filter is sized for the roots it holds (at least
// 256) at HoldingsBloomFalsePositive; at HoldingsBloomCapacity roots it takes
// 39,261 bits (4.8KiB, 6.5KiB in base64 JSON). MaxHeldRoots listed take
// about 12KiB of JSON. With the rest of an offer that stays under a third of
// the 64KiB gossip payload.
const (
	MaxHeldRoots               = 128
	HoldingsBloomCapacity      = 4096
	HoldingsBloomFalsePositive = 0.01
	// MaxHoldingsBloomBits is the largest filter a provider may send: the
	// one NewHoldings builds at HoldingsBloomCapacity roots.
	MaxHoldingsBloomBits = 39261
	maxHoldingsBloomK    = 16
	minBloomRoots        = 256
	maxRootLen           = 256
)

// ErrBadHoldings is what every problem with a Holdings is.
var ErrBadHoldings = errors.New("bad holdings")

// IsZero reports whether h says nothing is held.
func (h Holdings) IsZero() bool { return len(h.Roots) == 0 && len(h.Bloom) == 0 }

// Lists reports whether h lists root among its largest holdings (the
// filter's roots are not consulted).
func (h Holdings) Lists(root string) bool {
	return slices.ContainsFunc(h.Roots, func(d Datum) bool { return d.Root == root })
}

// NewHoldings summarizes the roots a provider holds: the MaxHeldRoots
// largest are listed (ties by root), the next HoldingsBloomCapacity go into
// the filter and the smallest beyond those are left out, since they weigh
// least. A root given twice counts once, at its largest size. The result
// depends only on the set given, never on its order, so two providers
// holding the same roots send the same bytes.
func NewHoldings(held []Datum) Holdings {
	rs := slices.Clone(held)
	rs = slices.DeleteFunc(rs, func(d Datum) bool { return d.Root == "" || len(d.Root) > maxRootLen })
	slices.SortFunc(rs, func(a, b Datum) int {
		if c := cmp.Compare(a.Root, b.Root); c != 0 {
			return c
		}
		return cmp.Compare(b.Size, a.Size)
	})
	rs = slices.CompactFunc(rs, func(a, b Datum) bool { return a.Root == b.Root })
	slices.SortStableFunc(rs, func(a, b Datum) int { return cmp.Compare(b.Size, a.Size) })
	var h Holdings
	n := min(len(rs), MaxHeldRoots)
	h.Roots = slices.Clone(rs[:n])
	slices.SortFunc(h.Roots, func(a, b Datum) int { return cmp.Compare(a.Root, b.Root) })
	rest := rs[n:min(len(rs), MaxHeldRoots+HoldingsBloomCapacity)]
	if len(rest) > 0 {
		// Sized for the roots it holds, so that a provider with a short
		// tail sends a short filter; the same set gives the same size.
		f := bloom.NewWithEstimates(uint(max(len(rest), minBloomRoots)), HoldingsBloomFalsePositive)
		for _, d := range rest {
			f.AddString(d.Root)
		}
		b, err := f.MarshalBinary()
		if err == nil { // it writes to memory and cannot fail
			h.Bloom = b
		}
	}
	if len(h.Roots) == 0 {
		h.Roots = nil
	}
	return h
}

// Check reports whether h keeps to the bounds: every listed root once, in
// order, sizes at most MaxInputSize, and a filter of the expected form and
// size, so that no offer can make peers allocate more than the bounds allow.
func (h Holdings) Check() error {
	if len(h.Roots) > MaxHeldRoots {
		return fmt.Errorf("%w: %d roots listed, limit %d", ErrBadHoldings, len(h.Roots), MaxHeldRoots)
	}
	for i, d := range h.Roots {
		if d.Root == "" || len(d.Root) > maxRootLen || !IsCID(d.Root) {
			return fmt.Errorf("%w: roots[%d] is not a CID", ErrBadHoldings, i)
		}
		if d.Size > MaxInputSize {
			return fmt.Errorf("%w: roots[%d] size over %s", ErrBadHoldings, i, Size(MaxInputSize))
		}
		if i > 0 && h.Roots[i-1].Root >= d.Root {
			return fmt.Errorf("%w: roots not sorted or repeated at %d", ErrBadHoldings, i)
		}
	}
	if len(h.Bloom) > 0 {
		if _, err := decodeBloom(h.Bloom); err != nil {
			return err
		}
	}
	return nil
}

// decodeBloom reads a filter after checking its header against the bounds:
// the library would otherwise allocate whatever length the header claims.
// The form is m, k and the bit set's length as big-endian uint64s, then
// ⌈m/64⌉ words.
func decodeBloom(b []byte) (*bloom.BloomFilter, error) {
	if len(b) < 24 {
		return nil, fmt.Errorf("%w: bloom filter of %d bytes is too short", ErrBadHoldings, len(b))
	}
	m := binary.BigEndian.Uint64(b[0:8])
	k := binary.BigEndian.Uint64(b[8:16])
	length := binary.BigEndian.Uint64(b[16:24])
	switch {
	case m == 0 || m > MaxHoldingsBloomBits:
		return nil, fmt.Errorf("%w: bloom filter of %d bits, limit %d", ErrBadHoldings, m, MaxHoldingsBloomBits)
	case k == 0 || k > maxHoldingsBloomK:
		return nil, fmt.Errorf("%w: bloom filter with %d hashes", ErrBadHoldings, k)
	case length != m:
		return nil, fmt.Errorf("%w: bloom filter lengths disagree", ErrBadHoldings)
	case uint64(len(b)) != 24+8*((m+63)/64):
		return nil, fmt.Errorf("%w: bloom filter of %d bytes for %d bits", ErrBadHoldings, len(b), m)
	}
	f := &bloom.BloomFilter{}
	if err := f.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadHoldings, err)
	}
	return f, nil
}

// appendHoldings encodes h for the view hash.
func appendHoldings(b []byte, h *Holdings) []byte {
	b = append(b, 'H')
	b = appendUint(b, uint64(len(h.Roots)))
	for _, d := range h.Roots {
		b = appendString(b, d.Root)
		b = appendUint(b, d.Size)
	}
	b = binary.AppendUvarint(b, uint64(len(h.Bloom)))
	return append(b, h.Bloom...)
}

// appendJobData encodes what a job says about locality for the view hash.
func appendJobData(b []byte, j *Job) []byte {
	b = append(b, 'D')
	b = appendString(b, j.Request.Locality)
	b = appendInt(b, int64(j.Request.LocalityWait))
	b = appendUint(b, uint64(len(j.Data)))
	for _, d := range j.Data {
		b = appendString(b, d.Root)
		b = appendUint(b, d.Size)
	}
	return b
}

// hasLocality reports whether the job's encoding carries locality fields.
func hasLocality(j *Job) bool {
	return len(j.Data) > 0 || j.Request.Locality != "" || j.Request.LocalityWait != 0
}

// equalHoldings is bytes.Equal over the parts, for tests and callers that
// refresh an offer only when it changed.
func equalHoldings(a, b *Holdings) bool {
	return slices.Equal(a.Roots, b.Roots) && bytes.Equal(a.Bloom, b.Bloom)
}

// Equal reports whether h and o say the same.
func (h Holdings) Equal(o Holdings) bool { return equalHoldings(&h, &o) }

// Reads returns what a broadcast declaration's job reads, for Job.Data:
// each input and the image, by root, with the size recorded at submit.
// Sources that are not CIDs (a declaration not yet imported) and sizes
// not recorded are left out, since they weigh nothing.
func (d Declaration) Reads() []Datum {
	var out []Datum
	for _, in := range d.Data {
		if in.Size > 0 && IsCID(in.Source) {
			out = append(out, Datum{Root: in.Source, Size: uint64(in.Size)})
		}
	}
	if d.Work.ImageSize > 0 && IsCID(d.Work.Image) {
		out = append(out, Datum{Root: d.Work.Image, Size: uint64(d.Work.ImageSize)})
	}
	return out
}

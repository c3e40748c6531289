package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// GPUSeen is one GPU as the provider's sandbox found it before the run:
// the driver's UUID and product name (or a simulated GPU's).
type GPUSeen struct {
	UUID  string `json:"uuid"`
	Model string `json:"model"`
}

// maxGPUsSeen bounds the list: no lease holds more GPUs than a
// declaration may ask for.
const maxGPUsSeen = 64

// appendGPUsSeen encodes a non-empty list for signing: its length, then
// each GPU's UUID and model, length-prefixed.
func appendGPUsSeen(b []byte, gs []GPUSeen) []byte {
	if len(gs) == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(gs)))
	for _, g := range gs {
		b = appendString(b, g.UUID)
		b = appendString(b, g.Model)
	}
	return b
}

func validateGPUsSeen(r *Receipt) error {
	if len(r.GPUsSeen) == 0 {
		return nil
	}
	if !r.Final {
		return errors.New("gpus_seen: only a final receipt says what the run saw")
	}
	if len(r.GPUsSeen) > maxGPUsSeen {
		return fmt.Errorf("gpus_seen: %d, at most %d", len(r.GPUsSeen), maxGPUsSeen)
	}
	for i, g := range r.GPUsSeen {
		for _, s := range []string{g.UUID, g.Model} {
			if s == "" || len(s) > maxModelLen || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
				return fmt.Errorf("gpus_seen[%d]: want a UUID and a model of printable UTF-8, at most %d bytes each", i, maxModelLen)
			}
		}
	}
	return nil
}

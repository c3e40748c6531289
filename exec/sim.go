package exec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSimSpec is wrapped by every error of [ParseSimSpec].
var ErrSimSpec = errors.New("bad simulated GPU spec")

// maxSimGPUs bounds a simulation spec so that a typo ("4000xH100") fails
// loudly instead of advertising a data centre.
const maxSimGPUs = 1024

// ParseSimSpec parses a description of simulated GPUs: comma-separated
// groups of COUNTxMODEL:MEMORY, as in "4xH100:80GiB" or
// "2xA100:40GiB,1xL4:24GiB". MEMORY takes the units B, KiB, MiB, GiB, TiB,
// KB, MB, GB or TB (case does not matter). GPUs are indexed in order across
// groups. Each UUID is "GPU-" followed by the first 16 bytes of
// sha256(seed ‖ index as 8 big-endian bytes), laid out like a UUID: seed is
// the node's peer ID, so the UUIDs survive restarts and differ between
// nodes that simulate the same hardware.
func ParseSimSpec(spec string, seed string) ([]GPU, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("%w: empty (want e.g. 4xH100:80GiB)", ErrSimSpec)
	}
	var gpus []GPU
	for group := range strings.SplitSeq(spec, ",") {
		group = strings.TrimSpace(group)
		count, model, mem, err := parseSimGroup(group)
		if err != nil {
			return nil, fmt.Errorf("%w: group %q: %w", ErrSimSpec, group, err)
		}
		if len(gpus)+count > maxSimGPUs {
			return nil, fmt.Errorf("%w: more than %d GPUs", ErrSimSpec, maxSimGPUs)
		}
		for range count {
			i := len(gpus)
			gpus = append(gpus, GPU{
				Index:       i,
				UUID:        simUUID(seed, i),
				Model:       model,
				MemoryBytes: mem,
				Simulated:   true,
				Minor:       -1,
			})
		}
	}
	return gpus, nil
}

// parseSimGroup parses one COUNTxMODEL:MEMORY group.
func parseSimGroup(group string) (count int, model string, mem uint64, err error) {
	if group == "" {
		return 0, "", 0, errors.New("empty group (stray comma?)")
	}
	countStr, rest, ok := strings.Cut(group, "x")
	if !ok {
		return 0, "", 0, errors.New("no count (want COUNTxMODEL:MEMORY)")
	}
	count, err = strconv.Atoi(strings.TrimSpace(countStr))
	if err != nil || count < 1 {
		return 0, "", 0, fmt.Errorf("count %q is not a positive integer", countStr)
	}
	model, memStr, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, "", 0, fmt.Errorf("no memory size after model %q (want %s:80GiB)", rest, rest)
	}
	model = strings.TrimSpace(model)
	if model == "" {
		return 0, "", 0, errors.New("empty model")
	}
	for _, r := range model {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return 0, "", 0, fmt.Errorf("model %q: only letters, digits, '-', '_' and '.' are allowed", model)
		}
	}
	mem, err = parseBytes(strings.TrimSpace(memStr))
	if err != nil {
		return 0, "", 0, fmt.Errorf("memory: %w", err)
	}
	return count, model, mem, nil
}

var byteUnits = map[string]uint64{
	"b":   1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// parseBytes parses a whole number with a unit, such as "80GiB".
func parseBytes(s string) (uint64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q does not start with a number", s)
	}
	unit, ok := byteUnits[strings.ToLower(strings.TrimSpace(s[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (want GiB, MiB, GB, ...)", s, s[i:])
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q: want a positive number", s)
	}
	if n > math.MaxUint64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

// simUUID derives a UUID-shaped identifier for simulated GPU i of seed.
func simUUID(seed string, i int) string {
	h := sha256.New()
	h.Write([]byte(seed))
	var idx [8]byte
	binary.BigEndian.PutUint64(idx[:], uint64(i))
	h.Write(idx[:])
	x := hex.EncodeToString(h.Sum(nil)[:16])
	return "GPU-" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

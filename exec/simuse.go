package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SimUse reports what uses simulated GPUs, as exec/nvidia reports it for
// real ones, from a directory a test or a person writes to: a file named
// after a GPU's index (DIR/0) says that a process that is no job's uses
// that GPU, and removing it frees the GPU again. The file may hold that
// process's PID; otherwise the process is reported with PID 0, unknown.
// Simulated GPUs compute nothing, so their utilisation is always unknown.
//
//	touch DIR/0     # the owner starts using GPU 0
//	echo 4242 >DIR/1 # … and GPU 1, as process 4242
//	rm DIR/0        # and stops using GPU 0
//
// Immutable; safe for concurrent use.
type SimUse struct {
	dir  string
	gpus []GPU
}

// NewSimUse returns a SimUse for gpus (as [ParseSimSpec] made them) over
// dir, which it creates so that a GPU can be marked busy with a plain
// touch.
func NewSimUse(dir string, gpus []GPU) (*SimUse, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulated GPU use: %w", err)
	}
	return &SimUse{dir: dir, gpus: append([]GPU(nil), gpus...)}, nil
}

// Dir is the directory the marks are read from.
func (s *SimUse) Dir() string { return s.dir }

// Use reads the marks: one GPUUse per simulated GPU, in index order. A
// file for an index with no GPU is ignored. A mark whose content is not a
// PID still marks its GPU busy: it is the file being there that counts.
func (s *SimUse) Use(ctx context.Context) ([]GPUUse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]GPUUse, 0, len(s.gpus))
	for _, g := range s.gpus {
		u := GPUUse{Index: g.Index, UUID: g.UUID, Utilization: UtilizationUnknown}
		b, err := os.ReadFile(filepath.Join(s.dir, strconv.Itoa(g.Index)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("simulated GPU use: GPU %d: %w", g.Index, err)
		default:
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid < 0 {
				pid = 0
			}
			u.ForeignPIDs = []int{pid}
		}
		out = append(out, u)
	}
	return out, nil
}

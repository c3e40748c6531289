package epoch

import (
	"slices"
	"sync"

	"github.com/e31network/e31/node/api"
)

// historySize is how many recent Match results a History keeps.
const historySize = 64

// History is the recent Match results of a node, oldest first, for
// inspection (GET /v1/matches). The zero value is ready to use.
type History struct {
	mu      sync.Mutex  // guards matches; memory only
	matches []api.Match // at most historySize
}

// Add keeps m, forgetting the oldest beyond historySize.
func (h *History) Add(m api.Match) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.matches = append(h.matches, m)
	if len(h.matches) > historySize {
		h.matches = h.matches[len(h.matches)-historySize:]
	}
}

// All returns the results kept, oldest first.
func (h *History) All() []api.Match {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.matches)
}

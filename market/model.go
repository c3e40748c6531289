package market

import "strings"

// ModelMatches reports whether a GPU the driver names offered satisfies
// a request.gpu_model of requested, as Match decides it: equal, or a whole
// word of it, ignoring case. An empty request is satisfied by any GPU.
func ModelMatches(offered, requested string) bool {
	return requested == "" || modelMatches(strings.ToLower(offered), strings.ToLower(requested))
}

package apiserver

import (
	"net/http"
	"strconv"

	"github.com/e31network/e31/node/api"
)

// nodes answers GET /v1/nodes: the providers in view, and with ?lost=1
// (any true value) after them those that left it lately, where the
// Network remembers them (LostNodes).
func nodes(n Network, r *http.Request) []api.Node {
	out := n.Nodes()
	if lost, _ := strconv.ParseBool(r.URL.Query().Get("lost")); lost {
		if l, ok := n.(LostNodes); ok {
			out = append(out, l.LostNodes()...)
		}
	}
	return out
}

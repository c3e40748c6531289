package node

import (
	"log/slog"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/images"
)

// rawHooks wire the hostile submitter of Config.RawContent
// (node/rawcontent) into the submitter and the API, which only a build
// with the byzantine tag has (rawhooks_byzantine.go); a default build wires
// the node's own store and library, and no debug route
// (rawhooks_default.go). Set in New, immutable after.
type rawHooks struct {
	on     bool // Config.RawContent
	store  *content.Store
	images *images.Library
	log    *slog.Logger
}

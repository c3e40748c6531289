//go:build byzantine

package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/api"
)

// debugCARRoute serves POST /v1/debug/car where Config.PutCAR is set. Only
// a build with the byzantine tag has the route (debugcar_off.go).
func (s *Server) debugCARRoute(mux *http.ServeMux) {
	if s.cfg.PutCAR != nil {
		mux.HandleFunc("POST /v1/debug/car", s.putCAR)
	}
}

// maxDebugCAR caps the CAR a test may post to POST /v1/debug/car.
const maxDebugCAR = 1 << 30

// putCAR answers POST /v1/debug/car (Config.PutCAR): the body is a CAR,
// stored block by block as it is, every root pinned. Only a daemon that
// plays a hostile submitter for tests serves it.
func (s *Server) putCAR(w http.ResponseWriter, r *http.Request) {
	roots, err := s.cfg.PutCAR(r.Context(), http.MaxBytesReader(w, r.Body, maxDebugCAR))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.Is(err, content.ErrBadCAR) || errors.Is(err, content.ErrInvalidData) ||
			errors.Is(err, content.ErrUnsupported) || errors.As(err, &tooBig) {
			err = badRequest(err)
		}
		writeError(w, err)
		return
	}
	out := api.DebugCAR{Roots: make([]string, 0, len(roots))}
	for _, c := range roots {
		out.Roots = append(out.Roots, c.String())
	}
	s.cfg.Log.Info("stored a CAR as it is (raw content)", "roots", len(roots))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

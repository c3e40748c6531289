//go:build !byzantine

package apiserver

import "net/http"

// debugCARRoute adds nothing: only a build with the byzantine tag serves
// POST /v1/debug/car (debugcar.go), whatever Config.PutCAR says.
func (s *Server) debugCARRoute(*http.ServeMux) {}

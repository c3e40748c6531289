package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/e31network/e31/node/api"
)

// Leases are the leases this node provides (provider.LeaseQuery): those
// that run now, and those that ended, from the ledger.
type Leases interface {
	Live(ctx context.Context) ([]api.Lease, error)
	History(ctx context.Context, f api.LeasesQuery) ([]api.EndedLease, error)
}

// leases answers GET /v1/leases: the leases this node provides now, the
// oldest first. With history=1, the leases it provided that have ended,
// the newest first: at most max (api.DefaultLeaseHistory when absent), of
// those held since since (a duration back from now or an RFC 3339 time).
// A server given no Leases answers ErrNoLeases.
func (s *Server) leases(r *http.Request) (any, error) {
	q := r.URL.Query()
	if q.Get("history") == "" {
		if q.Has("since") || q.Has("max") {
			return nil, badRequest(errors.New("since and max are read with history=1: the live leases are listed whole"))
		}
		if s.cfg.Leases == nil {
			return nil, ErrNoLeases
		}
		return s.cfg.Leases.Live(r.Context())
	}
	var f api.LeasesQuery
	var err error
	if f.Since, err = api.ParseSince(q.Get("since"), time.Now()); err != nil {
		return nil, badRequest(err)
	}
	if v := q.Get("max"); v != "" {
		if f.Max, err = strconv.Atoi(v); err != nil || f.Max < 1 || f.Max > api.MaxLeaseHistory {
			return nil, badRequest(fmt.Errorf("max %q: want a count from 1 to %d", v, api.MaxLeaseHistory))
		}
	}
	if s.cfg.Leases == nil {
		return nil, ErrNoLeases
	}
	return s.cfg.Leases.History(r.Context(), f)
}

// ErrNoLeases answers GET /v1/leases on a server given no Leases.
var ErrNoLeases = errors.New("this daemon lists no leases over its API")

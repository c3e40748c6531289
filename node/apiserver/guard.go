package apiserver

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver/ui"
)

// What the guard refuses, each mapped to its status in status.
var (
	// ErrCrossOrigin is a request a web page made: from another origin
	// (403).
	ErrCrossOrigin = fmt.Errorf("%w: a request from a web page of another origin", ErrForbidden)
	// ErrUnauthorized is a request to a TCP API without its token, or
	// a one-time link that is no longer good (401).
	ErrUnauthorized = errors.New("unauthorized")
	errNoToken      = fmt.Errorf("%w: this API wants its token (Authorization: Bearer, from the daemon's DATA/%s): e31 reads it with --api-token-file, $E31_API_TOKEN or $E31_DATA/%s; a browser opens the dashboard with e31 ui", ErrUnauthorized, api.TokenFile, api.TokenFile)
	errBadLink      = fmt.Errorf("%w: this link was used already, or has expired; e31 ui makes another", ErrUnauthorized)
	// ErrReadOnly is a request that would change something, made with
	// the dashboard's cookie, which only reads (403).
	ErrReadOnly = fmt.Errorf("%w: the dashboard's cookie only reads; use the token", ErrForbidden)
	// ErrContentType is a request that may change something whose body
	// is not JSON (415).
	ErrContentType = errors.New("unsupported content type")
)

// cookiePrefix starts the name of the dashboard's cookie, which ends with
// the port it is for: a browser sends a cookie to every port of a host,
// and each of the daemons a machine runs has a cookie of its own.
const cookiePrefix = "e31-dashboard-"

// loginPath is the one-time link's path: the one request to a TCP API
// that needs no token, since the link's code is one.
const loginPath = ui.Prefix + "login"

// guard is what every request passes before any route sees it, in this
// order: it comes from no web page of another origin; it holds the token
// (or, to read, the dashboard's cookie) where the API is served on TCP;
// and where it may change something, its body is JSON.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := s.sameOrigin(r)
		if err == nil {
			err = s.authorize(r)
		}
		if err == nil {
			err = bodyType(r)
		}
		if err != nil {
			if errors.Is(err, ErrUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="e31d"`)
			}
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a request a web page of another origin made: one
// whose Sec-Fetch-Site is not same-origin or none, or whose Origin names
// another host than the request's. http.CrossOriginProtection judges
// them; it lets through every GET, trusting that a GET changes nothing,
// but here a GET runs a probe container (doctor), holds a job's log open
// or, with the dashboard's cookie, which a browser sends to every port
// of the host (a page served on another port of 127.0.0.1 is the same
// site), reads, so every method is judged as a POST would be. An Origin
// is checked whatever Sec-Fetch-Site says.
func (s *Server) sameOrigin(r *http.Request) error {
	asPost := r.WithContext(r.Context())
	asPost.Method = http.MethodPost
	if err := s.cop.Check(asPost); err != nil {
		return fmt.Errorf("%w (%v)", ErrCrossOrigin, err)
	}
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			return fmt.Errorf("%w (Origin %q)", ErrCrossOrigin, o)
		}
	}
	return nil
}

// authorize asks a request to a TCP API for its token, or to read, the
// dashboard's cookie. Over the unix socket nothing is asked: its mode and
// the caller's uid guard it.
func (s *Server) authorize(r *http.Request) error {
	a := s.cfg.Access
	if a == nil || s.unix {
		return nil
	}
	if r.Method == http.MethodGet && r.URL.Path == loginPath {
		return nil
	}
	switch a.grantOf(r, s.cookie) {
	case grantAll:
		return nil
	case grantRead:
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return nil
		}
		return ErrReadOnly
	}
	return errNoToken
}

// bodyType refuses a request that may change something unless its body
// is JSON (POST /v1/debug/car's, a CAR). A web page may send a form or
// text/plain anywhere without asking first; any other type only once the
// server has agreed to, which this one never does.
func bodyType(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	want := "application/json"
	if r.URL.Path == "/v1/debug/car" {
		want = api.CARType
	}
	got := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(got); err != nil || mt != want {
		return fmt.Errorf("%w %q: %s %s takes %s", ErrContentType, got, r.Method, r.URL.Path, want)
	}
	return nil
}

// login answers the one-time link (GET /ui/login?once=CODE): a code that
// is good, used once, gets the browser the dashboard's cookie, HttpOnly
// so that no script reads it, SameSite=Strict so that no other site's
// page makes the browser send it, and sends it on to the dashboard.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Access == nil || s.unix || !s.cfg.Access.redeem(r.URL.Query().Get("once")) {
		writeError(w, errBadLink)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     s.cookie,
		Value:    string(s.cfg.Access.session),
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, ui.Prefix, http.StatusSeeOther)
}

// uiLink answers POST /v1/ui/link: a one-time link to the dashboard, where
// this daemon serves one (its TCP API's address, or --ui's).
func (s *Server) uiLink(r *http.Request) (any, error) {
	base := s.cfg.Dashboard
	if base == "" && !s.unix && s.addr != "" {
		base = "http://" + s.addr
	}
	if base == "" || s.cfg.Access == nil {
		return nil, ErrNoDashboard
	}
	code, exp, err := s.cfg.Access.link()
	if err != nil {
		return nil, err
	}
	return api.UILink{URL: base + loginPath + "?once=" + code, Expires: exp}, nil
}

// ErrNoDashboard answers POST /v1/ui/link on a daemon that serves no
// dashboard (501).
var ErrNoDashboard = errors.New("this daemon serves no dashboard: its API is a unix socket; start it with --ui 127.0.0.1:PORT")

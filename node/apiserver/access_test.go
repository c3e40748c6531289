package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/submitter"
)

// testToken is the token of the TCP listeners tests start.
const testToken = "0123456789abcdef0123456789abcdef-test-token"

// withToken is an HTTP client that sends testToken with every request.
var withToken = &http.Client{Transport: bearer{testToken}}

// bearer adds a bearer token to each request it sends.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// drainer is a provider's drain, made up: it says whether a drain took.
type drainer struct{ drained atomic.Bool }

func (d *drainer) Drain(mode api.DrainMode, _ time.Time) (api.Drain, error) {
	d.drained.Store(true)
	return api.Drain{Mode: mode}, nil
}
func (d *drainer) Undrain() api.Drain { d.drained.Store(false); return api.Drain{} }
func (d *drainer) DrainStatus() api.Drain {
	if d.drained.Load() {
		return api.Drain{Mode: api.DrainGraceful}
	}
	return api.Drain{}
}

// guarded serves a node whose only part is its drain on a loopback port,
// with testToken, and its dashboard's own listener beside it.
func guarded(t *testing.T) (addr, uiAddr string, d *drainer, a *apiserver.Access) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d = &drainer{}
	a = apiserver.NewAccess(testToken)
	cfg := apiserver.Config{Addr: "127.0.0.1:0", Jobs: jobs{}, Drainer: d, Access: a, Log: slog.New(slog.DiscardHandler)}
	srv, err := apiserver.Listen(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	uiSrv, err := apiserver.ListenUI(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = srv.Shutdown(context.Background())
		_ = uiSrv.Shutdown(context.Background())
	})
	return srv.Addr(), uiSrv.Addr(), d, a
}

// call sends method url with the headers given ("Name: value") and a body
// (none when empty), and returns the status and the JSON error, if any.
func call(t *testing.T, method, url, body string, headers ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
			t.Errorf("%s %s: %s with no JSON error: %q", method, url, resp.Status, b)
		}
	}
	return resp.StatusCode, e.Error
}

// A TCP API, and the dashboard's listener, answer only a request with the
// token: one without it, or with another, is refused 401 with a JSON error
// that says where the token is, and a WWW-Authenticate header.
func TestTokenRequiredOnTCP(t *testing.T) {
	addr, ui, d, _ := guarded(t)
	auth := "Authorization: Bearer " + testToken
	for _, tc := range []struct {
		method, url, body string
		headers           []string
		want              int
	}{
		{"GET", "http://" + addr + "/v1/drain", "", nil, http.StatusUnauthorized},
		{"GET", "http://" + addr + "/v1/drain", "", []string{"Authorization: Bearer " + testToken + "x"}, http.StatusUnauthorized},
		{"GET", "http://" + addr + "/v1/drain", "", []string{"Authorization: Basic " + testToken}, http.StatusUnauthorized},
		{"GET", "http://" + addr + "/v1/drain", "", []string{auth}, http.StatusOK},
		{"POST", "http://" + addr + "/v1/drain", `{}`, []string{"Content-Type: application/json"}, http.StatusUnauthorized},
		{"GET", "http://" + addr + "/ui/", "", nil, http.StatusUnauthorized},
		{"GET", "http://" + ui + "/ui/", "", nil, http.StatusUnauthorized},
		{"GET", "http://" + ui + "/v1/jobs", "", nil, http.StatusUnauthorized},
		{"GET", "http://" + ui + "/ui/", "", []string{auth}, http.StatusOK},
	} {
		code, msg := call(t, tc.method, tc.url, tc.body, tc.headers...)
		if code != tc.want {
			t.Errorf("%s %s %v: %d %q, want %d", tc.method, tc.url, tc.headers, code, msg, tc.want)
		}
		if code == http.StatusUnauthorized && !strings.Contains(msg, api.TokenFile) {
			t.Errorf("%s %s: 401 %q does not say where the token is", tc.method, tc.url, msg)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/id", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want Bearer", got)
	}
	if d.drained.Load() {
		t.Fatal("a request without the token drained the node")
	}
	if _, err := apiserver.Listen(context.Background(), apiserver.Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("Listen served a TCP API without a token")
	}
}

// A request a web page of another origin makes is refused 403, whatever
// its method and even with the token: by Sec-Fetch-Site (cross-site, and
// same-site, which is any other port of 127.0.0.1), or by an Origin that
// is not the API's own. The API's own pages, and clients that are not
// browsers, pass.
func TestCrossOriginRefused(t *testing.T) {
	addr, _, d, _ := guarded(t)
	auth := "Authorization: Bearer " + testToken
	json := "Content-Type: application/json"
	for _, tc := range []struct {
		method, path string
		headers      []string
		want         int
	}{
		{"POST", "/v1/drain", []string{"Content-Type: text/plain", "Origin: http://127.0.0.1:9"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Origin: http://127.0.0.1:9"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Origin: http://evil.example"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Origin: null"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Sec-Fetch-Site: same-site"}, http.StatusForbidden},
		{"POST", "/v1/drain", []string{auth, json, "Sec-Fetch-Site: none", "Origin: http://evil.example"}, http.StatusForbidden},
		{"GET", "/v1/drain", []string{auth, "Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
		{"GET", "/v1/drain", []string{auth, "Sec-Fetch-Site: same-site"}, http.StatusForbidden},
		{"GET", "/v1/drain", []string{auth, "Origin: http://localhost:9"}, http.StatusForbidden},
		{"GET", "/ui/", []string{auth, "Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
		{"GET", "/v1/drain", []string{auth, "Sec-Fetch-Site: same-origin"}, http.StatusOK},
		{"GET", "/v1/drain", []string{auth, "Sec-Fetch-Site: none"}, http.StatusOK},
		{"GET", "/v1/drain", []string{auth, "Origin: http://" + addr}, http.StatusOK},
		{"GET", "/v1/drain", []string{auth}, http.StatusOK},
	} {
		body := ""
		if tc.method == "POST" {
			body = `{}`
		}
		code, msg := call(t, tc.method, "http://"+addr+tc.path, body, tc.headers...)
		if code != tc.want {
			t.Errorf("%s %s %v: %d %q, want %d", tc.method, tc.path, tc.headers, code, msg, tc.want)
		}
		if code == http.StatusForbidden && !strings.Contains(msg, "another origin") {
			t.Errorf("%s %s %v: 403 %q does not say why", tc.method, tc.path, tc.headers, msg)
		}
	}
	if d.drained.Load() {
		t.Fatal("a cross-origin request drained the node")
	}
	// The same request from the API's own origin takes.
	if code, msg := call(t, "POST", "http://"+addr+"/v1/drain", `{}`, auth, json, "Origin: http://"+addr, "Sec-Fetch-Site: same-origin"); code != http.StatusOK || !d.drained.Load() {
		t.Fatalf("a same-origin drain: %d %q", code, msg)
	}
}

// A request that may change something must say its body is JSON: what a
// page can send without asking (text/plain, a form) is refused 415, with
// the token or over the unix socket.
func TestBodyMustBeJSON(t *testing.T) {
	addr, _, d, _ := guarded(t)
	sock := filepath.Join(t.TempDir(), "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := apiserver.Listen(ctx, apiserver.Config{Addr: sock, Jobs: unknownJobs{}, Drainer: d, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Shutdown(context.Background()) })
	unixClient := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", sock)
	}}}
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "application/json-seq"} {
		for _, method := range []string{"POST", "DELETE"} {
			path := "/v1/drain"
			if method == "DELETE" {
				path = "/v1/images/bafkqaaa"
			}
			var hs []string
			if ct != "" {
				hs = []string{"Content-Type: " + ct}
			}
			code, msg := call(t, method, "http://"+addr+path, `{}`, append(hs, "Authorization: Bearer "+testToken)...)
			if code != http.StatusUnsupportedMediaType || !strings.Contains(msg, "application/json") {
				t.Errorf("TCP %s %s as %q: %d %q, want 415 naming application/json", method, path, ct, code, msg)
			}
			req, _ := http.NewRequest(method, "http://e31d"+path, strings.NewReader(`{}`))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := unixClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("unix %s %s as %q: %s, want 415", method, path, ct, resp.Status)
			}
		}
	}
	if d.drained.Load() {
		t.Fatal("a body that is not JSON drained the node")
	}
	if code, msg := call(t, "POST", "http://"+addr+"/v1/drain", `{}`, "Authorization: Bearer "+testToken, "Content-Type: application/json; charset=utf-8"); code != http.StatusOK || !d.drained.Load() {
		t.Fatalf("a JSON drain: %d %q", code, msg)
	}
	// The client sends JSON on every route that may change something,
	// with a body or without one.
	cl := api.NewClient(sock)
	if _, err := cl.Undrain(context.Background()); err != nil || d.drained.Load() {
		t.Fatalf("undrain over the socket: %v", err)
	}
	var se *api.StatusError
	if _, err := cl.Withdraw(context.Background(), "x"); !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Fatalf("withdraw over the socket: %v, want the submitter's 404", err)
	}
}

// unknownJobs knows no job.
type unknownJobs struct{ jobs }

func (unknownJobs) Withdraw(context.Context, string) (api.Job, error) {
	return api.Job{}, submitter.ErrNotFound
}

// The socket is 0600 from its first instant, made apart and renamed into
// place (nothing else is left beside it), needs no token, and is removed
// at Shutdown.
func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "e31.sock")
	if err := os.WriteFile(sock, nil, 0o644); err != nil { // left by a crash
		t.Fatal(err)
	}
	d := &drainer{}
	srv, err := apiserver.Listen(context.Background(), apiserver.Config{Addr: sock, Jobs: jobs{}, Drainer: d, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(sock)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v; want a socket, 0600", st.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("beside the socket: %v", entries)
	}
	if _, err := api.NewClient(sock).Drain(context.Background(), api.DrainRequest{}); err != nil || !d.drained.Load() {
		t.Fatalf("drain over the socket, no token: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is still there after Shutdown: %v", err)
	}
}

// e31 ui's one-time link: POST /v1/ui/link (with the token) makes it; opened
// once, it sets an HttpOnly, SameSite=Strict cookie named for the port and
// leads to the dashboard; opened again, or late, it is refused. The
// cookie reads (the page, the API's reads) and changes nothing.
func TestDashboardLink(t *testing.T) {
	addr, _, d, a := guarded(t)
	now := time.Now()
	var late atomic.Bool
	a.SetClock(func() time.Time {
		if late.Load() {
			return now.Add(3 * time.Minute)
		}
		return now
	})
	cl := api.NewClient(addr, api.WithToken(testToken))
	if _, err := api.NewClient(addr).UILink(context.Background()); err == nil {
		t.Fatal("a link made without the token")
	}
	link, err := cl.UILink(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link.URL, "http://"+addr+"/ui/login?once=") || !link.Expires.After(now) {
		t.Fatalf("link %+v", link)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, port, _ := net.SplitHostPort(addr)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" || len(cookies) != 1 {
		t.Fatalf("the link: %s to %q, cookies %v", resp.Status, resp.Header.Get("Location"), cookies)
	}
	c := cookies[0]
	if c.Name != "e31-dashboard-"+port || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v, want HttpOnly, SameSite=Strict, for the port", c)
	}
	if code, _ := call(t, "GET", link.URL, ""); code != http.StatusUnauthorized {
		t.Fatalf("the link opened twice: %d, want 401", code)
	}
	cookie := "Cookie: " + c.Name + "=" + c.Value
	for _, path := range []string{"/ui/", "/ui/app.js", "/v1/drain", "/v1/jobs/x/logs"} {
		if code, msg := call(t, "GET", "http://"+addr+path, "", cookie); code == http.StatusUnauthorized || code == http.StatusForbidden {
			t.Errorf("GET %s with the cookie: %d %q", path, code, msg)
		}
	}
	if code, _ := call(t, "POST", "http://"+addr+"/v1/drain", `{}`, cookie, "Content-Type: application/json"); code != http.StatusForbidden || d.drained.Load() {
		t.Fatalf("a drain with the dashboard's cookie: %d, want 403", code)
	}
	if code, _ := call(t, "GET", "http://"+addr+"/v1/drain", "", "Cookie: e31-dashboard-1="+c.Value); code != http.StatusUnauthorized {
		t.Fatalf("the cookie under another port's name: %d, want 401", code)
	}

	stale, err := cl.UILink(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	late.Store(true)
	if code, _ := call(t, "GET", stale.URL, ""); code != http.StatusUnauthorized {
		t.Fatalf("a link opened after it expired: %d, want 401", code)
	}
}

// A daemon whose API is the unix socket makes links to its --ui listener,
// which takes them; without one it says it serves no dashboard.
func TestDashboardLinkFromSocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := apiserver.NewAccess(testToken)
	cfg := apiserver.Config{Jobs: jobs{}, Access: a, Log: slog.New(slog.DiscardHandler)}
	ui, err := apiserver.ListenUI(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Shutdown(context.Background()) })
	cfg.Addr, cfg.Dashboard = filepath.Join(t.TempDir(), "with.sock"), "http://"+ui.Addr()
	with, err := apiserver.Listen(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = with.Shutdown(context.Background()) })
	cfg.Addr, cfg.Dashboard = filepath.Join(t.TempDir(), "without.sock"), ""
	without, err := apiserver.Listen(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = without.Shutdown(context.Background()) })

	var se *api.StatusError
	if _, err := api.NewClient(without.Addr()).UILink(ctx); !errors.As(err, &se) || se.Code != http.StatusNotImplemented || !strings.Contains(se.Msg, "--ui") {
		t.Fatalf("a link from a daemon without a dashboard: %v", err)
	}
	link, err := api.NewClient(with.Addr()).UILink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link.URL)
	if err != nil || u.Host != ui.Addr() {
		t.Fatalf("link %q, want one to %s", link.URL, ui.Addr())
	}
	jar := &cookieJar{}
	resp, err := (&http.Client{Jar: jar}).Get(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), `<script src="app.js">`) {
		t.Fatalf("the link led to %s %s", resp.Request.URL, resp.Status)
	}
}

// cookieJar keeps the cookies of one host, whatever the port, as a
// browser does.
type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.cookies }

// The token is made once, 0600, and kept; a file others may read, or one
// too short to be a token, is refused.
func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), api.TokenFile)
	tok, err := apiserver.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || len(tok) != 64 {
		t.Fatalf("token %q in a file of mode %v (%v), want 64 hex digits, 0600", tok, st.Mode(), err)
	}
	again, err := apiserver.LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Fatalf("loaded again: %q, %v; want the same token", again, err)
	}
	if read, err := api.ReadToken(path); err != nil || read != tok {
		t.Fatalf("ReadToken = %q, %v", read, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("beside the token: %v", entries)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := apiserver.LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "other users") {
		t.Fatalf("a token others may read: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := apiserver.LoadOrCreateToken(short); err == nil {
		t.Fatal("a six-letter token was taken")
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// pageRequest is one request a hostile page makes to a node's API.
type pageRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Body   string `json:"body,omitempty"`
	// CORS sends it as a script of the API's own origin would (JSON,
	// asking the API's leave first), not as a page may without asking.
	CORS bool `json:"cors,omitempty"`
}

// seen is a request as the mirror received it from the browser.
type seen struct {
	method, contentType, origin, site string
}

// mirror records what the browser sends: the requests of the hostile page,
// sent to it as to the APIs, so that the test knows what reached them.
type mirror struct {
	mu   sync.Mutex // state lock: guards got
	got  map[string][]seen
	http *httptest.Server
}

func newMirror(t *testing.T) *mirror {
	m := &mirror{got: make(map[string][]seen)}
	m.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		m.mu.Lock()
		m.got[r.URL.Path] = append(m.got[r.URL.Path], seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")})
		m.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(m.http.Close)
	return m
}

func (m *mirror) seen(path string) []seen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got[path])
}

// hostilePage serves a page that, opened, sends every attack to its API and
// to the mirror, and then says how many it sent.
func hostilePage(t *testing.T, attacks []pageRequest, mirrorURL string) *httptest.Server {
	script, err := json.Marshal(struct {
		Attacks []pageRequest `json:"attacks"`
		Mirror  string        `json:"mirror"`
	}{attacks, mirrorURL})
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json writes <, > and & as \u escapes: nothing in it ends
	// the script element.
	page := `<!doctype html><title>hostile</title><p id="out">running</p><script>
const cfg = ` + string(script) + `;
async function send(a, url) {
  const init = {method: a.method, mode: "no-cors", credentials: "include"};
  if (a.cors) { init.mode = "cors"; init.headers = {"Content-Type": "application/json"}; }
  if (a.body) init.body = a.body;
  try { await fetch(url, init); } catch (e) {}
}
(async () => {
  let n = 0;
  await Promise.all(cfg.attacks.map(async (a, i) => {
    await send(a, a.url);
    await send(a, cfg.mirror + "/" + i);
    n++;
  }));
  document.getElementById("out").textContent = "attack done: " + n;
})();
</script>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// nodeState is what the attacks would change on the two nodes.
type nodeState struct {
	Jobs        []string // node 0's jobs: ID, state, attempts
	Drained     [2]bool
	Images      int
	Connected   bool // node 0 to node 1
	LootWritten bool
}

func stateOf(t *testing.T, ctx context.Context, c *cluster.Cluster, loot string) nodeState {
	t.Helper()
	var s nodeState
	jobs, err := c.Client(0).Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, fmt.Sprintf("%s %s %d", j.ID, j.State, len(j.Attempts)))
	}
	slices.Sort(s.Jobs)
	for i := range 2 {
		id, err := c.Client(i).ID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Drained[i] = id.Drain != nil
	}
	ims, err := c.Client(0).Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Images = len(ims)
	peers, err := c.Client(0).Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Connected = slices.ContainsFunc(peers, func(p api.Peer) bool { return p.PeerID == c.Nodes[1].PeerID })
	_, err = os.Lstat(loot)
	s.LootWritten = !errors.Is(err, os.ErrNotExist)
	return s
}

// The host under attack, its API: a web page of another origin, opened in
// a real browser (served from another port of 127.0.0.1, a site the
// browser counts as the same, and from localhost, another site), sends
// every request that changes something to two nodes' APIs, as a page may
// without asking (no-cors: text/plain, no preflight) and as JSON (a
// preflight first). None takes: node 0 stays drained by its owner and
// node 1 undrained, no job is submitted, withdrawn, resumed or written
// out, no image imported, no peer blocked. The same requests from Go with
// the browser's own headers are refused 403 even with the token; without
// the token 401; with it and text/plain, 415. The dashboard still opens
// through e31 ui's link and lists the jobs.
func TestHostUnderAttackAPI(t *testing.T) {
	exe := browser(t)
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub := c.Client(0)
	done := submit(t, sub, decl("finished", "echo done", 1, time.Minute))
	done = waitJob(t, sub, done.ID, 60*time.Second, "release", released)
	// More GPUs than any provider has: it waits, and costs nothing.
	queued := submit(t, sub, decl("waits", "true", 4, time.Minute))
	if _, err := sub.Drain(ctx, api.DrainRequest{Mode: api.DrainGraceful}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	loot, secret := filepath.Join(dir, "loot"), filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("the owner's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, ctx, c, loot)
	if !before.Drained[0] || before.Drained[1] || !before.Connected || before.Images != 0 || len(before.Jobs) != 2 {
		t.Fatalf("before the attack: %+v", before)
	}

	// A job a page would have the daemon stage a file of the owner's for.
	thief := decl("steal", "cat /in", 0, time.Minute)
	thief.Data = []market.Input{{Source: secret, Mount: "/in"}}
	steal, err := json.Marshal(api.SubmitRequest{Declaration: mustJSON(t, thief)})
	if err != nil {
		t.Fatal(err)
	}
	api0, api1 := "http://"+c.Nodes[0].API, "http://"+c.Nodes[1].API
	attacks := []pageRequest{
		{Method: "POST", URL: api0 + "/v1/jobs", Body: string(steal)},
		{Method: "POST", URL: api0 + "/v1/jobs", Body: fmt.Sprintf(`{"resume_of":%q,"from_start":true}`, done.ID)},
		{Method: "POST", URL: api0 + "/v1/jobs/" + queued.ID + "/withdraw"},
		{Method: "POST", URL: api0 + "/v1/jobs/" + done.ID + "/get", Body: fmt.Sprintf(`{"dir":%q}`, loot)},
		{Method: "POST", URL: api0 + "/v1/undrain"},
		{Method: "POST", URL: api1 + "/v1/drain", Body: `{"mode":"now"}`},
		{Method: "POST", URL: api1 + "/v1/drain", Body: `{"mode":"now"}`, CORS: true},
		{Method: "POST", URL: api0 + "/v1/images", Body: fmt.Sprintf(`{"ref":"oci-archive:%s"}`, secret)},
		{Method: "DELETE", URL: api0 + "/v1/images/bafkqaaa", CORS: true},
		{Method: "POST", URL: api0 + "/v1/debug/block", Body: fmt.Sprintf(`{"peers":[%q]}`, c.Nodes[1].PeerID)},
		{Method: "POST", URL: api0 + "/v1/ui/link", Body: `{}`},
		{Method: "GET", URL: api0 + "/v1/doctor"},
	}
	m := newMirror(t)
	page := hostilePage(t, attacks, m.http.URL)
	pageURLs := map[string]string{
		"same-site":  page.URL + "/",
		"cross-site": strings.Replace(page.URL, "127.0.0.1", "localhost", 1) + "/",
	}
	for site, url := range pageURLs {
		dom := string(chromiumFor(t, ctx, exe, 5*time.Second, "--dump-dom", url))
		if want := fmt.Sprintf("attack done: %d", len(attacks)); !strings.Contains(dom, want) {
			t.Fatalf("the %s page did not finish (%q):\n%s", site, want, dom)
		}
	}
	if after := stateOf(t, ctx, c, loot); !equalState(after, before) {
		t.Fatalf("the page changed the nodes:\nbefore %+v\nafter  %+v", before, after)
	}

	// What the browser sent: each request a page may send without asking,
	// as text/plain, from each page's origin, which the browser says is
	// the same site or another. A JSON or DELETE request went no further
	// than its preflight.
	browserHeaders := map[string]seen{}
	for i, a := range attacks {
		got := m.seen(fmt.Sprintf("/%d", i))
		sent := map[string]seen{}
		for _, s := range got {
			if s.method == http.MethodOptions {
				continue
			}
			sent[s.site] = s
		}
		switch {
		case a.CORS:
			if len(sent) != 0 {
				t.Errorf("attack %d (%s %s as JSON): the browser sent it without the API's leave: %+v", i, a.Method, a.URL, got)
			}
		case len(sent) != 2:
			t.Errorf("attack %d (%s %s): the mirror saw %+v, want it from both pages", i, a.Method, a.URL, got)
		case a.Method == http.MethodPost && a.Body != "":
			for site, s := range sent {
				if !strings.HasPrefix(s.contentType, "text/plain") || s.origin == "" {
					t.Errorf("attack %d from the %s page went as %+v, want text/plain with an Origin", i, site, s)
				}
				browserHeaders[site] = s
			}
		}
	}
	if len(browserHeaders) != 2 {
		t.Fatalf("the browser's headers by site: %+v", browserHeaders)
	}

	// The same requests, curl-like, from Go.
	tok, err := api.ReadToken(c.Nodes[0].TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attacks {
		body := a.Body
		if body == "" && a.Method != http.MethodGet {
			body = `{}`
		}
		if code, msg := send(t, a.Method, a.URL, body, "Content-Type: application/json"); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d %q, want 401", a.Method, a.URL, code, msg)
		}
		for site, h := range browserHeaders {
			code, msg := send(t, a.Method, a.URL, body, "Authorization: Bearer "+tok, "Content-Type: "+h.contentType, "Origin: "+h.origin, "Sec-Fetch-Site: "+h.site)
			if code != http.StatusForbidden {
				t.Errorf("%s %s with the token and the %s page's headers: %d %q, want 403", a.Method, a.URL, site, code, msg)
			}
		}
		if a.Method != http.MethodGet {
			if code, msg := send(t, a.Method, a.URL, body, "Authorization: Bearer "+tok, "Content-Type: text/plain;charset=UTF-8"); code != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with the token as text/plain: %d %q, want 415", a.Method, a.URL, code, msg)
			}
		}
	}
	if after := stateOf(t, ctx, c, loot); !equalState(after, before) {
		t.Fatalf("the requests from Go changed the nodes:\nbefore %+v\nafter  %+v", before, after)
	}

	// The owner's dashboard still works, through e31 ui's link.
	dom := string(chromium(t, ctx, exe, "--dump-dom", uiLink(t, ctx, c.Nodes[0])))
	if rows := jobRows(dom); !slices.Contains(rows, done.ID) || !slices.Contains(rows, queued.ID) {
		t.Fatalf("the dashboard lists %v, want %s and %s:\n%s", rows, done.ID, queued.ID, dom)
	}
	// And the attacks were real: one sent as the owner's e31 sends it takes.
	if code, msg := send(t, "POST", api1+"/v1/drain", `{"mode":"now"}`, "Authorization: Bearer "+tok, "Content-Type: application/json"); code != http.StatusOK {
		t.Fatalf("the owner's drain: %d %q", code, msg)
	}
	if s := stateOf(t, ctx, c, loot); !s.Drained[1] {
		t.Fatal("the owner's drain did not take")
	}
}

func equalState(a, b nodeState) bool {
	return slices.Equal(a.Jobs, b.Jobs) && a.Drained == b.Drained && a.Images == b.Images &&
		a.Connected == b.Connected && a.LootWritten == b.LootWritten
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send sends a request with the headers given ("Name: value") and returns
// the status and the JSON error.
func send(t *testing.T, method, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
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
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

package metrics

import (
	"net"
	"net/http"
	"testing"
)

// Profiles are served on a loopback address only; metrics on any.
func TestProfilesOnLoopbackOnly(t *testing.T) {
	m := New()
	for _, tc := range []struct {
		listen  string
		profile int
	}{
		{"127.0.0.1:0", http.StatusOK},
		// Every interface: reached here through 127.0.0.1, but open
		// to the network.
		{"0.0.0.0:0", http.StatusNotFound},
	} {
		ln, err := net.Listen("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		stop := m.serveOn(ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		for path, want := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/": tc.profile, "/debug/pprof/cmdline": tc.profile} {
			resp, err := http.Get("http://127.0.0.1:" + port + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("listening on %s, GET %s: %s, want %d", tc.listen, path, resp.Status, want)
			}
		}
		stop()
	}
}

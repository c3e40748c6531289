package apiserver_test

import (
	"net"
	"net/http"
	"testing"
)

// A request addressed to any other name than the loopback is refused, on
// the API and on the dashboard's own address: a web page cannot reach
// either through a name it controls that resolves to 127.0.0.1.
func TestOnlyLoopbackHostsAreServed(t *testing.T) {
	for _, ui := range []bool{false, true} {
		addr := listen(t, ui, nil)
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		for host, want := range map[string]int{
			addr:                               http.StatusOK,
			"localhost:" + port:                http.StatusOK,
			"[::1]:" + port:                    http.StatusOK,
			"rebind.example:" + port:           http.StatusMisdirectedRequest,
			"192.168.1.10:" + port:             http.StatusMisdirectedRequest,
			"127.0.0.1.rebind.example:" + port: http.StatusMisdirectedRequest,
		} {
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/ui/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			resp, err := withToken.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("ui %v, Host %q: %s, want %d", ui, host, resp.Status, want)
			}
		}
	}
}

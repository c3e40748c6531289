package ui_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// reachNetwork is fakeNetwork with a node whose reachability is r.
type reachNetwork struct {
	fakeNetwork
	r *api.Reachability
}

func (n reachNetwork) ID() api.ID {
	id := n.fakeNetwork.ID()
	id.Reachability = n.r
	return id
}

// The header says how peers reach the node: an unreachable one in red,
// with its why and fix in full; a relayed one names its relay.
func TestHeaderReachability(t *testing.T) {
	exe := browser(t)
	line := "no peer can reach this node: it gets no work; behind a NAT or a firewall (AutoNAT: private); fix: forward tcp/4001"
	for _, tc := range []struct {
		r    *api.Reachability
		want []string
	}{
		{&api.Reachability{State: "unreachable", Line: line}, []string{`<span class="reach reach-unreachable"`, ">unreachable</span>", `<div class="reach-why">` + line + "</div>"}},
		{&api.Reachability{State: "relayed", Relays: []string{"12D3KooWRelayRelay9999"}, Line: "relayed"}, []string{`<span class="reach reach-relayed"`, ">relayed through …elay9999</span>"}},
	} {
		srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
			Network: reachNetwork{r: tc.r}, Jobs: fakeJobs{}, Ledger: fakeLedger{}, Logs: fakeLogs{}, Log: slog.New(slog.DiscardHandler),
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out := headless(t, ctx, exe, "--dump-dom", srv.URL+"/ui/")
		cancel()
		srv.Close()
		header, _, _ := strings.Cut(string(out), "</header>")
		for _, w := range tc.want {
			if !strings.Contains(header, w) {
				t.Errorf("%s: the header lacks %s:\n%s", tc.r.State, w, header)
			}
		}
	}
}

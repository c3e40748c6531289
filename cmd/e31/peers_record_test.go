package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

// e31 peers PROVIDER prints this node's record of the provider, and
// --json the same record as the API gives it.
func TestPeersRecord(t *testing.T) {
	l, m := realLedger(t)
	addr := daemonAPI(t, l)
	stdout, _, err := e31(t, "--api", addr, "peers", m.Provider.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{m.Provider.ID.String(), "leases               4", "disputes             1", "verification         0 won, 0 lost"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("peers PROVIDER lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, err = e31(t, "--api", addr, "peers", "--json", m.Provider.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	var rec api.PeerRecord
	if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if rec.PeerID != m.Provider.ID.String() || rec.Leases != 4 || rec.Score == "" {
		t.Errorf("--json: %+v", rec)
	}
	if _, _, err := e31(t, "--api", addr, "peers", "not-a-peer"); err == nil || !strings.Contains(err.Error(), "not-a-peer") {
		t.Errorf("a record of no peer ID: %v, want an error naming it", err)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
)

// e31 usage shows the hours replicas lost to a verdict as not owed, and
// their share.
func TestUsageShowsLostVerification(t *testing.T) {
	rep := ledger.UsageReport{
		Policy: ledger.DefaultPolicy(),
		Rows: []ledger.UsageRow{
			{Peer: "liar", Role: ledger.RoleProvider, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob,
				Basis: ledger.SettlementTwoSided, LostVerification: true, Leases: 1, GPUHours: 0.5},
			{Peer: "honest", Role: ledger.RoleProvider, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob,
				Basis: ledger.SettlementTwoSided, Leases: 1, GPUHours: 0.5, Owed: true, OwedGPUHours: 0.5},
		},
		Total: ledger.HeldSum{Leases: 2, GPUHours: 1, OwedGPUHours: 0.5, NotOwedGPUHours: 0.5, LostGPUHours: 0.5},
	}
	var out bytes.Buffer
	if err := printUsage(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no (lost verification)", "not owed, lost verification: 0.500 GPU-h", "replicas:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
	if got := heldOwed(1, 0.5) + lostShare(0.5); got != "held 1.000 GPU-h, owed 0.500, not owed 0.500 (of which lost verification 0.500)" {
		t.Errorf("job line %q", got)
	}
	if lostShare(0) != "" {
		t.Error("a share of nothing lost is shown")
	}
}

package market

import (
	"fmt"
	"reflect"
	"testing"
)

// TestLargeOffer exercises the paths kept for oversized offers (device
// lookups by map, tries for large classes) against the reference matcher.
func TestLargeOffer(t *testing.T) {
	v := View{Epoch: 3, Now: scenarioStart}
	for p := range 40 {
		o := Offer{Provider: fmt.Sprintf("prov%02d", p), CPUs: 256, MemoryBytes: uint64(2 * TiB)}
		n := 8
		if p == 0 {
			n = 40
		}
		for g := range n {
			o.GPUs = append(o.GPUs, GPU{Index: g, UUID: fmt.Sprintf("prov%02d/%d", p, g), Model: "H100", MemoryBytes: uint64(80 * GiB), Free: g%5 != 0})
		}
		v.Offers = append(v.Offers, o)
	}
	v.Leases = append(v.Leases, Lease{ID: "l", Job: "x", Provider: "prov00", GPUs: []string{"prov00/1", "prov00/2", "prov00/30"},
		CPUs: 4, MemoryBytes: uint64(GiB), Start: v.Now - int64(Hour), Limit: 2 * Hour})
	for j := range 120 {
		v.Jobs = append(v.Jobs, Job{ID: fmt.Sprintf("job%03d", j), Submitter: fmt.Sprintf("s%d", j%7),
			SubmittedAt: v.Now - int64(j%13)*int64(Minute),
			Request:     Request{GPUs: []int{1, 2, 4, 8, 24}[j%5], CPUs: 2, Memory: GiB, Limit: Duration(j%4+1) * Hour}})
	}
	got, want := Match(v, Options{}), refMatch(v, Options{})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Match and the reference differ:\n%+v\n%+v", got, want)
	}
	if len(got.Assignments) == 0 {
		t.Fatal("nothing assigned")
	}
	for _, a := range got.Assignments {
		if a.Provider == "prov00" {
			for _, u := range a.GPUs {
				if u == "prov00/1" || u == "prov00/30" || u == "prov00/0" {
					t.Fatalf("leased or held device %s assigned", u)
				}
			}
		}
	}
}

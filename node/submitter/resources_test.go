package submitter

import (
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

// A receipt is countersigned for the CPUs, memory and disk the lease's
// terms and the job's declaration gave it, or for none (a provider that
// predates them), never for more.
func TestReceiptResourcesChecked(t *testing.T) {
	terms := wire.LeaseTerms{CPUs: 4, MemoryBytes: 8 << 30}
	req := market.Request{CPUs: 4, Memory: 8 * market.GiB}
	for _, tc := range []struct {
		name         string
		cpus         int
		memory, disk uint64
		ok           bool
	}{
		{"none named", 0, 0, 0, true},
		{"as agreed", 4, 8 << 30, market.DefaultDisk, true},
		{"more CPUs", 8, 8 << 30, market.DefaultDisk, false},
		{"more memory", 4, 16 << 30, market.DefaultDisk, false},
		{"more disk", 4, 8 << 30, 2 * market.DefaultDisk, false},
	} {
		r := ledger.Receipt{CPUs: tc.cpus, MemoryBytes: tc.memory, DiskBytes: tc.disk}
		if err := checkResources(r, terms, req); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

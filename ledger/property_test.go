package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyChainDetectsAnyByteFlip: any sequence of valid receipts,
// appended in any interleaving of leases and with repeats, verifies; and
// flipping any one byte of any stored entry makes Verify name that entry.
func TestPropertyChainDetectsAnyByteFlip(t *testing.T) {
	parties := []party{newParty(t, 1), newParty(t, 2), newParty(t, 3)}
	rapid.Check(t, func(rt *rapid.T) {
		l, err := Open(context.Background(), "", Options{InMemory: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer l.Close()

		type lease struct {
			prov, sub party
			job       string
			gpus      int
			next      uint64
			prev      string
			until     time.Time
			done      bool
		}
		leases := make([]*lease, rapid.IntRange(1, 4).Draw(rt, "leases"))
		for i := range leases {
			p := rapid.IntRange(0, len(parties)-1).Draw(rt, "provider")
			s := rapid.IntRange(0, len(parties)-1).Draw(rt, "submitter")
			leases[i] = &lease{
				prov: parties[p], sub: parties[s],
				job:   fmt.Sprintf("job-%d", rapid.IntRange(0, 2).Draw(rt, "job")),
				gpus:  rapid.IntRange(0, 8).Draw(rt, "gpus"),
				until: t0,
			}
		}
		var stored []Receipt
		steps := rapid.IntRange(1, 10).Draw(rt, "steps")
		for range steps {
			if len(stored) > 0 && rapid.IntRange(0, 5).Draw(rt, "repeat") == 0 {
				// Appending a stored receipt again changes nothing.
				if _, err := l.Append(context.Background(), stored[rapid.IntRange(0, len(stored)-1).Draw(rt, "which")]); err != nil {
					rt.Fatal(err)
				}
				continue
			}
			ls := leases[rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")]
			if ls.done {
				continue
			}
			ls.until = ls.until.Add(time.Duration(rapid.IntRange(0, 3_600_000).Draw(rt, "ms")) * time.Millisecond)
			r := Receipt{
				Lease: fmt.Sprintf("lease-%p", ls), Job: ls.job, Provider: ls.prov.id, Submitter: ls.sub.id,
				GPUs: ls.gpus, Seq: ls.next, HeldFrom: t0, HeldUntil: ls.until,
				Phase: rapid.SampledFrom([]Phase{PhaseStaging, PhaseRun, PhaseOutput}).Draw(rt, "phase"),
				Prev:  ls.prev,
			}
			if rapid.IntRange(0, 4).Draw(rt, "final") == 0 {
				r = final(r)
				ls.done = true
			}
			r = sign(rt, r, ls.prov, ls.sub)
			if _, err := l.Append(context.Background(), r); err != nil {
				rt.Fatal(err)
			}
			ls.next, ls.prev = ls.next+1, r.Digest()
			stored = append(stored, r)
		}
		rep, err := l.Verify(context.Background())
		if err != nil {
			rt.Fatal(err)
		}
		if !rep.OK || rep.Entries != len(stored) {
			rt.Fatalf("untouched ledger of %d receipts: %+v", len(stored), rep)
		}
		if len(stored) == 0 {
			return
		}

		index := uint64(rapid.IntRange(1, len(stored)).Draw(rt, "entry"))
		raw := rawEntry(rt, l, index)
		pos := rapid.IntRange(0, len(raw)-1).Draw(rt, "byte")
		raw[pos] ^= rapid.ByteRange(1, 255).Draw(rt, "xor")
		setRaw(rt, l, entryKey(index), raw)
		rep, err = l.Verify(context.Background())
		if err != nil {
			rt.Fatal(err)
		}
		if rep.OK || rep.FirstBad.Index != index {
			rt.Fatalf("flipped byte %d of entry %d (%q): %+v", pos, index, raw, rep.FirstBad)
		}
	})
}

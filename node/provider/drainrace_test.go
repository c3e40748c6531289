package provider

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
)

// slowRecords is a record store whose writes take a moment, as a disk's
// do: a write that nothing orders can be overtaken by a later one.
type slowRecords struct{ statetest.Records }

func (s *slowRecords) Put(prefix, id string, v any) error {
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	return s.Records.Put(prefix, id, v)
}

func (s *slowRecords) Delete(prefix, id string) error {
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	return s.Records.Delete(prefix, id)
}

// A drain and an undrain that race leave the store as the API last
// answers: a restart comes back drained exactly when the node shows
// drained now, whichever of the two went first.
func TestDrainUndrainRaceEndsStoredAsAnswered(t *testing.T) {
	prov := wiretest.FreshParty(t)
	recs := &slowRecords{}
	p := newTestProvider(t, prov, Config{}, nil, nil, recs, nil)
	for round := range 300 {
		var wg sync.WaitGroup
		var drained, undrained api.Drain
		wg.Add(2)
		go func() {
			defer wg.Done()
			d, err := p.Drain(api.DrainGraceful, time.Time{})
			if err != nil {
				t.Error(err)
			}
			drained = d
		}()
		go func() {
			defer wg.Done()
			undrained = p.Undrain()
		}()
		wg.Wait()
		now := p.DrainStatus()
		if now != drained && now != undrained {
			t.Fatalf("round %d: the API shows %+v, which neither call answered (%+v, %+v)", round, now, drained, undrained)
		}
		stored := false
		if err := recs.Each(state.PrefixDrain, func([]byte) error { stored = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if shown := now.By == api.DrainByOwner; stored != shown {
			t.Fatalf("round %d: the store says drained %v, the API drained %v", round, stored, shown)
		}
		again := newTestProvider(t, prov, Config{}, nil, nil, recs, nil)
		if err := again.Recover(t.Context()); err != nil {
			t.Fatal(err)
		}
		if again.Draining() != (now.By == api.DrainByOwner) {
			t.Fatalf("round %d: a restart comes back drained %v, the API showed %+v", round, again.Draining(), now)
		}
	}
}

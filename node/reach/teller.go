package reach

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Teller tells the node's owner how peers reach it: a log line once its
// reachability is known, and again each time it changes (public, relayed
// through R, unreachable with why and the fix). Its fields are set before
// Run and never changed after.
type Teller struct {
	Host host.Host
	// On says the node runs NAT traversal (Traverse); without it nothing
	// is learned and nothing told.
	On   bool
	Boot []peer.AddrInfo
	Log  *slog.Logger
	// Settle is how long a new state must hold before it is told, so
	// that a node that reserves its relay slot a moment after it starts
	// is not first told it is unreachable. Zero: DefaultSettle.
	Settle time.Duration
}

// DefaultSettle is Teller.Settle's default: about what a relay slot takes
// to be granted once the node's first offer has reached the relay.
const DefaultSettle = 20 * time.Second

// tellEvery is how often the status is read again between events.
const tellEvery = 2 * time.Second

// Status is the node's reachability now.
func (t *Teller) Status() Status { return Explain(Observe(t.Host, t.On, t.Boot)) }

// Run tells each settled change of the status until ctx ends.
func (t *Teller) Run(ctx context.Context) {
	if !t.On {
		return
	}
	sub, err := t.Host.EventBus().Subscribe([]any{new(event.EvtLocalReachabilityChanged),
		new(event.EvtLocalAddressesUpdated), new(event.EvtPeerIdentificationCompleted)})
	if err != nil {
		t.Log.Warn("watch this node's reachability", "err", err)
		return
	}
	defer sub.Close()
	settle := t.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	told := teller{settle: settle}
	tick := time.NewTicker(tellEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Out():
		case <-tick.C:
		}
		s := t.Status()
		if was, ok := told.observe(s, time.Now()); ok {
			t.tell(s, was)
		}
	}
}

// tell logs s; was is the state told before it, empty for the first.
func (t *Teller) tell(s Status, was string) {
	args := []any{"reachability", s.State}
	if was != "" {
		args = append(args, "was", was)
	}
	switch s.State {
	case StateUnreachable:
		t.Log.Warn(NoWork, append(args, "why", s.Why, "fix", s.Fix)...)
	case StateRelayed:
		t.Log.Info("peers reach this node through a relay", append(args, "relays", s.Relays)...)
	default:
		t.Log.Info("peers reach this node directly", args...)
	}
}

// teller decides which statuses are told: a known state (public, relayed
// through the same relays, unreachable) once it has held for settle and
// differs from the one told last. Memory only, owned by Run's goroutine.
type teller struct {
	settle  time.Duration
	told    string // the key of the state told last; "" before the first
	pending string // the key of the state not yet told, held since since
	since   time.Time
}

// observe takes the status at now and reports whether to tell it, and the
// state told before.
func (t *teller) observe(s Status, now time.Time) (was string, tell bool) {
	if s.State != StatePublic && s.State != StateRelayed && s.State != StateUnreachable {
		t.pending = ""
		return "", false
	}
	relays := slices.Clone(s.Relays)
	slices.Sort(relays)
	key := s.State
	for _, r := range relays {
		key += " " + r
	}
	if key == t.told {
		t.pending = ""
		return "", false
	}
	if key != t.pending {
		t.pending, t.since = key, now
	}
	if now.Sub(t.since) < t.settle {
		return "", false
	}
	was = stateOf(t.told)
	t.told, t.pending = key, ""
	return was, true
}

// stateOf is the state of a key: its first word.
func stateOf(key string) string {
	state, _, _ := strings.Cut(key, " ")
	return state
}

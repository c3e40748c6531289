package offer

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// Provider is what the offer reads of the provider role
// (provider.Provider).
type Provider interface {
	GPUs() []market.GPU
	Images() bool
	// Silent says the provider misbehaves on purpose by sending nothing
	// (node.Config.Misbehave): no offer is published.
	Silent() bool
	// Draining says the node's owner drains it: the offer says so, and
	// Match gives it nothing new.
	Draining() bool
	// Window says whether the node is outside its contribution hours at
	// now, and else when its window ends (Unix ms, 0: never).
	Window(now time.Time) (closed bool, openUntil int64)
	// Disk is the largest request.disk the node can grant now, and why it
	// lends no disk where it lends none (market.Offer.NoDisk); it does no
	// I/O.
	Disk() (maxJobDisk uint64, noDisk string)
	// TakesCPUJobs says the node takes jobs that ask for no GPU.
	TakesCPUJobs() bool
}

// Publisher publishes a node's offer. Its exported fields are set before
// Run and never changed after; Changed may be called from any goroutine,
// before Run too.
type Publisher struct {
	// What the offer says besides the provider's GPUs (node.Config).
	Self         string // the provider's peer ID
	CPUs         int
	MemoryBytes  uint64
	RequireImage bool
	// MaxJobDisk caps what the offer says a job's disk may be, beside
	// what Provider.Disk says can be granted now; 0: no cap of its own.
	MaxJobDisk uint64
	// Prices are the node's prices per GPU-hour by model (e31d --price),
	// Currency their unit: the offer names the price of its GPUs.
	Prices   market.PriceList
	Currency string
	// Heartbeat is how often the offer is published when nothing changes.
	Heartbeat time.Duration
	Provider  Provider
	// Reach is how peers reach this node and whether none can
	// (reach.Offered).
	Reach func() (reach string, unreachable bool)
	// Store is what the holdings are read from (content.Store).
	Store  HeldStore
	Gossip interface {
		Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error)
	}
	// Delays is the gossip delay this node observed, announced with the
	// offer (view.GossipDelays).
	Delays interface{ Announced() int64 }
	Addrs  func() []string
	Log    *slog.Logger

	once    sync.Once
	changed chan struct{} // a signal to look at the offer now; see signals
}

func (p *Publisher) signals() chan struct{} {
	p.once.Do(func() { p.changed = make(chan struct{}, 1) })
	return p.changed
}

// Changed says the provider's GPUs may have changed: the offer is looked
// at now, and published unless the change only took GPUs.
func (p *Publisher) Changed() {
	select {
	case p.signals() <- struct{}{}:
	default:
	}
}

// Offer is the offer the node publishes, without its holdings, and how
// peers reach it.
func (p *Publisher) Offer() (market.Offer, string) {
	reach, unreachable := p.Reach()
	o := market.Offer{Provider: p.Self, CPUs: p.CPUs, MemoryBytes: p.MemoryBytes, GPUs: p.Provider.GPUs(),
		Images: p.Provider.Images(), RequireImage: p.RequireImage, Unreachable: unreachable,
		Draining: p.Provider.Draining(), NoCPUJobs: !p.Provider.TakesCPUJobs()}
	o.Price = p.Prices.For(o.GPUs)
	o.Closed, o.OpenUntil = p.Provider.Window(time.Now())
	o.MaxJobDisk, o.NoDisk = p.Provider.Disk()
	if o.NoDisk != "" {
		o.MaxJobDisk = 0
	} else if p.MaxJobDisk != 0 && (o.MaxJobDisk == 0 || p.MaxJobDisk < o.MaxJobDisk) {
		o.MaxJobDisk = p.MaxJobDisk
	}
	return o, reach
}

// Run publishes the offer at start, whenever it changes as the package doc
// says and every heartbeat, until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	changedGPUs := p.signals()
	t := time.NewTicker(p.Heartbeat)
	defer t.Stop()
	// What the store holds changes without the GPUs changing (staging done,
	// retention), so it is looked at more often than the heartbeat and a
	// change is published at once.
	check := time.NewTicker(min(p.Heartbeat, holdingsCheckEvery))
	defer check.Stop()
	held := newHeldContent(p.Store)
	var holdings market.Holdings
	refresh := func() (changed bool) {
		h, err := held.summary(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.Log.Warn("offer holdings", "err", err)
			}
			return false
		}
		changed = !h.Equal(holdings)
		holdings = h
		return changed
	}
	refresh()
	var published market.Offer
	for {
		offer, reach := p.Offer()
		offer.Holdings = holdings
		published = offer
		body := wire.OfferBody{
			Offer:       offer,
			Reach:       reach,
			Addrs:       p.Addrs(),
			HeartbeatMs: p.Heartbeat.Milliseconds(),
			GossipP99Ms: p.Delays.Announced(),
		}
		if offer.Price != 0 {
			body.Currency = p.Currency
		}
		if p.Provider.Silent() {
			// Misbehaving on purpose (node.Config.Misbehave): nothing more is sent.
		} else if _, err := p.Gossip.Publish(ctx, p2p.TopicOffers, wire.KindOffer, body); err != nil && ctx.Err() == nil {
			p.Log.Warn("publish offer", "err", err)
		}
		for publish := false; !publish; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				refresh()
				publish = true
			case <-changedGPUs:
				changed := refresh()
				offer, _ := p.Offer()
				publish = changed || !onlyTaken(published, offer)
			case <-check.C:
				publish = refresh()
			}
		}
	}
}

// onlyTaken reports whether now differs from published in nothing but GPUs
// that were free and are now held; holdings are compared by the caller.
func onlyTaken(published, now market.Offer) bool {
	if len(published.GPUs) != len(now.GPUs) {
		return false
	}
	for i, g := range now.GPUs {
		p := published.GPUs[i]
		if g.Free && !p.Free {
			return false
		}
		p.Free = g.Free
		if p != g {
			return false
		}
	}
	published.GPUs, now.GPUs = nil, nil
	published.Holdings, now.Holdings = market.Holdings{}, market.Holdings{}
	return reflect.DeepEqual(published, now)
}

package scale

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MeshOptions sizes the multi-hop check: Hosts real gossip hosts on
// 127.0.0.1, each dialling Dial others at random, publishing Rate messages
// a second of Size bytes, from hosts at random, for Window.
type MeshOptions struct {
	Hosts  int
	Dial   int
	Rate   float64
	Size   int
	Window time.Duration
}

func (o MeshOptions) withDefaults() MeshOptions {
	o.Hosts = cmp.Or(o.Hosts, 200)
	o.Dial = cmp.Or(o.Dial, 8)
	o.Rate = cmp.Or(o.Rate, 20)
	o.Size = cmp.Or(o.Size, 1800)
	o.Window = cmp.Or(o.Window, 30*time.Second)
	return o
}

// MeshReport is what the multi-hop run measured: the copies of each
// message a host received and sent (the near network's assumption), and
// how long gossip took to bring a message to every host.
type MeshReport struct {
	Hosts     int     `json:"hosts"`
	Published int     `json:"published"`
	CopiesIn  float64 `json:"copies_in_per_msg"`
	CopiesOut float64 `json:"copies_out_per_msg"`
	// Reached is the share of (message, host) pairs delivered, the
	// publisher's own delivery included. CopiesIn counts per delivery, the
	// publisher's too, which received none.
	Reached float64 `json:"reached"`
	// DelayP50Ms and DelayP99Ms are publish → delivery over every host;
	// AllP50Ms and AllP99Ms publish → the last host, per message.
	DelayP50Ms float64 `json:"delay_p50_ms"`
	DelayP99Ms float64 `json:"delay_p99_ms"`
	AllP50Ms   float64 `json:"last_host_p50_ms"`
	AllP99Ms   float64 `json:"last_host_p99_ms"`
}

type meshHost struct {
	h   host.Host
	g   *p2p.Gossip
	sub *p2p.Subscription
}

// MeasureMesh runs the multi-hop check. The hosts run the network's own
// gossip (p2p.NewGossip: its router parameters, scoring and limits), with
// no body validators: they check every envelope's signature, not what it
// says. Links are loopback, without latency: the delays are what the hosts'
// own work and queues add hop after hop.
func MeasureMesh(ctx context.Context, log func(format string, args ...any), o MeshOptions) (MeshReport, error) {
	o = o.withDefaults()
	r := MeshReport{Hosts: o.Hosts}
	if o.Hosts < 2 {
		return r, fmt.Errorf("scale: a mesh needs at least 2 hosts")
	}
	ctx, cancel := context.WithCancel(ctx)
	var g task.Group
	defer func() {
		cancel()
		g.Wait(context.Background())
	}()
	const network = "scale-mesh"
	var hosts []*meshHost
	defer func() {
		for _, m := range hosts {
			m.sub.Cancel()
			m.h.Close()
		}
	}()
	for range o.Hosts {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return r, err
		}
		h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: "e31-scale-mesh"})
		if err != nil {
			return r, err
		}
		gs, err := p2p.NewGossip(ctx, h, key, p2p.GossipConfig{Network: network})
		if err != nil {
			h.Close()
			return r, err
		}
		sub, err := gs.Subscribe(p2p.TopicOffers)
		if err != nil {
			h.Close()
			return r, err
		}
		hosts = append(hosts, &meshHost{h: h, g: gs, sub: sub})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, m := range hosts {
		for _, j := range rng.Perm(len(hosts))[:min(o.Dial+1, len(hosts))] {
			if j == i || len(m.h.Network().ConnsToPeer(hosts[j].h.ID())) > 0 {
				continue
			}
			o := hosts[j].h
			if err := m.h.Connect(ctx, peer.AddrInfo{ID: o.ID(), Addrs: o.Addrs()}); err != nil {
				return r, fmt.Errorf("scale: connect hosts: %w", err)
			}
		}
	}
	if log != nil {
		log("scale: %d hosts connected; letting the meshes form", len(hosts))
	}
	if err := task.Sleep(ctx, 3*time.Second); err != nil { // a few gossipsub heartbeats: GRAFTs settle
		return r, err
	}

	var mu sync.Mutex
	published := map[[32]byte]time.Time{}
	delivered := map[[32]byte][]time.Duration{}
	for _, m := range hosts {
		g.Go(func() {
			for {
				s, err := m.sub.Next(ctx)
				if err != nil {
					return
				}
				at := time.Now()
				mu.Lock()
				if t, ok := published[s.Hash()]; ok {
					delivered[s.Hash()] = append(delivered[s.Hash()], at.Sub(t))
				}
				mu.Unlock()
			}
		})
	}
	before := meshCounts(hosts)
	pad := strings.Repeat("p", o.Size)
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
	end := time.Now().Add(o.Window)
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			tick.Stop()
			return r, ctx.Err()
		case <-tick.C:
		}
		from := hosts[rng.IntN(len(hosts))]
		mu.Lock() // the publisher delivers to itself at once
		s, err := from.g.Publish(ctx, p2p.TopicOffers, "mesh", struct {
			N   int
			Pad string
		}{i, pad})
		if err == nil {
			published[s.Hash()] = time.Now()
		}
		mu.Unlock()
		if err != nil {
			tick.Stop()
			return r, fmt.Errorf("scale: publish: %w", err)
		}
	}
	tick.Stop()
	if err := task.Sleep(ctx, 2*time.Second); err != nil { // the last messages' way round
		return r, err
	}
	after := meshCounts(hosts)

	mu.Lock()
	defer mu.Unlock()
	r.Published = len(published)
	var all, last []float64
	pairs := 0
	for _, ds := range delivered {
		var worst time.Duration
		for _, d := range ds {
			all = append(all, float64(d)/float64(time.Millisecond))
			worst = max(worst, d)
		}
		pairs += len(ds)
		if len(ds) == len(hosts) {
			last = append(last, float64(worst)/float64(time.Millisecond))
		}
	}
	if r.Published > 0 {
		r.Reached = float64(pairs) / float64(r.Published*len(hosts))
	}
	r.DelayP50Ms, r.DelayP99Ms = quantiles(all)
	r.AllP50Ms, r.AllP99Ms = quantiles(last)
	in := after.in - before.in
	if d := after.delivered - before.delivered; d > 0 {
		r.CopiesIn = float64(in) / float64(d)
		r.CopiesOut = float64(after.sent-before.sent) / float64(d)
	}
	return r, nil
}

type meshTotals struct{ delivered, in, sent uint64 }

// meshCounts sums the hosts' gossip meters on the offers topic.
func meshCounts(hosts []*meshHost) meshTotals {
	var t meshTotals
	for _, m := range hosts {
		c := m.g.Counts().Messages[p2p.TopicOffers]
		t.delivered += c[p2p.KindDelivered]
		t.in += c[p2p.KindDelivered] + c[p2p.KindDuplicate] + c[p2p.KindRejected] + c[p2p.KindIgnored]
		t.sent += c[p2p.KindSent]
	}
	return t
}

func quantiles(v []float64) (p50, p99 float64) {
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return v[len(v)/2], v[min(len(v)-1, len(v)*99/100)]
}

// WriteText prints the multi-hop report for people.
func (r MeshReport) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "multi-hop check: %d real hosts, %d messages\n"+
		"copies of each message per host: %.2f received, %.2f sent (the model assumes 6.3)\n"+
		"delivered to %.1f%% of hosts; publish -> delivery p50 %.1f ms, p99 %.1f ms; -> the last host p50 %.1f ms, p99 %.1f ms\n",
		r.Hosts, r.Published, r.CopiesIn, r.CopiesOut, 100*r.Reached, r.DelayP50Ms, r.DelayP99Ms, r.AllP50Ms, r.AllP99Ms)
	return err
}

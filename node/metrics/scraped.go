package metrics

import (
	"github.com/e31network/e31/exec/layers"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/p2p"
	"github.com/prometheus/client_golang/prometheus"
)

// Sources are the node's parts the series read at scrape time, each from
// memory.
type Sources struct {
	Provider  interface{ Counts() provider.Counts }
	Submitter interface{ Counts() map[api.JobState]int }
	Images    interface{ Stats() layers.CacheStats }
	Gossip    interface {
		Rejections() map[string]uint64
		Counts() p2p.GossipCounts
	}
	Guard *p2p.Guard
	View  interface{ Bounded() view.BoundCounts }
}

// Register adds the series that are read from s when scraped. Call it once.
func (m *Registry) Register(s Sources) {
	gauge := func(name, help string, labels prometheus.Labels, fn func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, fn))
	}
	gauge("e31_gpus", "GPUs of this node, held by a signed lease or free.", prometheus.Labels{"state": "held"}, func() float64 {
		return float64(s.Provider.Counts().Held)
	})
	gauge("e31_gpus", "GPUs of this node, held by a signed lease or free.", prometheus.Labels{"state": "free"}, func() float64 {
		c := s.Provider.Counts()
		return float64(c.GPUs - c.Held)
	})
	for _, st := range api.JobStates {
		if st == api.JobRejected {
			continue // a refused declaration never becomes a job: e31_jobs_rejected_total counts them
		}
		gauge("e31_jobs", "Jobs submitted from this node, by state.", prometheus.Labels{"state": string(st)}, func() float64 {
			return float64(s.Submitter.Counts()[st])
		})
	}
	gauge("e31_leases_active", "Leases this node provides now.", nil, func() float64 {
		return float64(s.Provider.Counts().Leases)
	})
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_image_layers_unpacked_total", Help: "Image layers unpacked into the layer cache (a layer found there is not counted)."}, func() float64 {
		return float64(s.Images.Stats().Unpacks)
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_image_layer_cache_hits_total", Help: "Image layers found already unpacked in the layer cache."}, func() float64 {
		return float64(s.Images.Stats().Hits)
	}))
	for _, r := range []string{p2p.ReasonOversized, p2p.ReasonMalformed, p2p.ReasonUnsigned, p2p.ReasonForged, p2p.ReasonStale, p2p.ReasonReplayed, p2p.ReasonUnwanted, p2p.ReasonInvalid} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_rejected_total", Help: "Gossip payloads rejected, by reason.", ConstLabels: prometheus.Labels{"reason": r}}, func() float64 {
			return float64(s.Gossip.Rejections()[r])
		}))
	}
	m.registerGuard(s.Guard)
	m.registerGossip(s.Gossip)
	m.registerView(s.View)
}

// registerView adds what the jobs view holds against its bounds, and what
// the bounds refused and evicted (node/view, "Bounds"): a flood of fresh
// identities shows as evictions of the newest and largest.
func (m *Registry) registerView(v interface{ Bounded() view.BoundCounts }) {
	for _, what := range []string{"jobs", "bytes"} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_view_held", Help: "What the view of the jobs topic holds against its bounds: jobs (tasks and parts each one), and bytes of signed declarations.",
			ConstLabels: prometheus.Labels{"what": what}}, func() float64 {
			c := v.Bounded()
			if what == "jobs" {
				return float64(c.Jobs)
			}
			return float64(c.DeclarationBytes)
		}))
	}
	for _, r := range view.BoundReasons() {
		if r != view.BoundSubmitter {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_view_evicted_total", Help: "Jobs (tasks and parts each one) the view of the jobs topic evicted to stay within a bound, by bound: a holder over its fair share gave up its newest declaration.",
				ConstLabels: prometheus.Labels{"reason": r}}, func() float64 {
				return float64(v.Bounded().Evicted[r])
			}))
		}
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_view_refused_total", Help: "Declarations the view of the jobs topic refused, by bound: its own (jobs or bytes: the declarer was first in line to be evicted), or the submitter's.",
			ConstLabels: prometheus.Labels{"reason": r}}, func() float64 {
			return float64(v.Bounded().Refused[r])
		}))
	}
}

// registerGossip adds what the gossip carried: copies of messages and
// control entries by topic and kind, and RPC bytes by topic and direction
// (p2p.GossipCounts), so that one peer's share of the network's gossip can
// be read off any daemon.
func (m *Registry) registerGossip(g interface{ Counts() p2p.GossipCounts }) {
	for _, topic := range p2p.GossipTopics() {
		for _, kind := range p2p.GossipKinds() {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_messages_total",
				Help:        "Gossip message copies received (delivered, duplicate, rejected, ignored) and sent, and control entries received (ihave, iwant, idontwant, graft, prune), by topic.",
				ConstLabels: prometheus.Labels{"topic": topic, "kind": kind}}, func() float64 {
				return float64(g.Counts().Messages[topic][kind])
			}))
		}
		for _, dir := range []string{"in", "out"} {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_bytes_total",
				Help:        "Gossip RPC bytes received and sent, by topic (none: what names no topic), without the transport's framing.",
				ConstLabels: prometheus.Labels{"topic": topic, "direction": dir}}, func() float64 {
				c := g.Counts()
				if dir == "in" {
					return float64(c.BytesIn[topic])
				}
				return float64(c.BytesOut[topic])
			}))
		}
	}
}

// registerGuard adds the series of the gossip defences: what the per-peer
// limits dropped before validation, and how many peers sit in each score
// band (a peer in "graylist" is being ignored).
func (m *Registry) registerGuard(g *p2p.Guard) {
	for _, topic := range []string{p2p.TopicOffers, p2p.TopicJobs} {
		for _, reason := range p2p.LimitReasons() {
			if reason == p2p.LimitNewSubmitter && topic != p2p.TopicJobs {
				continue // declarations travel on the jobs topic only
			}
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_limited_total", Help: "Gossip messages dropped by per-peer limits, by topic and reason.",
				ConstLabels: prometheus.Labels{"topic": topic, "reason": reason}}, func() float64 {
				return float64(g.Limited()[topic][reason])
			}))
		}
	}
	for _, band := range p2p.ScoreBands() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_gossip_peers", Help: "Gossip peers by score band: ok, or below the gossip, publish or graylist threshold.",
			ConstLabels: prometheus.Labels{"band": band}}, func() float64 {
			return float64(g.ScoreCounts()[band])
		}))
	}
}

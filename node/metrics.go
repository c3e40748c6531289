package node

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/p2p"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus series, in a registry of its own so
// that several nodes can share a process (tests). Every series read at
// scrape time answers from memory: no scrape waits on a disk or a peer.
type metrics struct {
	reg       *prometheus.Registry
	provider  *provider.Metrics
	submitter *submitter.Metrics
	// served counts bytes served over the bulk protocol, by kind of peer.
	served *prometheus.CounterVec
	// panics counts the panics recovered where one unit of work (a stream
	// request, a gossip message, an API request, a lease) failed and the
	// daemon went on. Each is logged with its stack; any is a bug.
	panics *prometheus.CounterVec
}

func newMetrics() *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	receipts := counter("e31_receipts_total", "Receipts stored in this node's ledger.")
	persist := counter("e31_persist_errors_total", "Writes of job or lease records that failed (each also logged).")
	m := &metrics{
		reg: prometheus.NewRegistry(),
		provider: &provider.Metrics{
			Leases:        counter("e31_leases_total", "Leases this node signed as provider."),
			Receipts:      receipts,
			PersistErrors: persist,
		},
		submitter: &submitter.Metrics{
			Submitted:     counter("e31_jobs_submitted_total", "Jobs submitted from this node."),
			Rejected:      counter("e31_jobs_rejected_total", "Declarations refused at submit."),
			Receipts:      receipts,
			PersistErrors: persist,
		},
	}
	staged := counter("e31_bytes_staged_total", "Input bytes fetched to run leases.")
	returned := counter("e31_bytes_returned_total", "Output and checkpoint bytes fetched by this submitter.")
	m.provider.Staged = counterProgress{staged}
	m.submitter.Returned = counterProgress{returned}
	prestaged := counter("e31_bytes_prestaged_total", "Input bytes fetched before a lease, for a job Match reserved this node for (off the meter).")
	m.provider.Prestaged = counterProgress{prestaged}
	m.provider.Fetched = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_content_fetched_bytes_total", Help: "Input bytes this provider fetched, by kind of source (submitter or provider)."}, []string{"from"})
	m.served = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_content_served_bytes_total", Help: "Bytes this node served to peers over the bulk protocol, by kind of peer (provider: a peer with an offer; other)."}, []string{"to"})
	m.reg.MustRegister(m.submitter.Submitted, m.submitter.Rejected, m.provider.Leases, receipts, persist, staged, returned, prestaged, m.provider.Fetched, m.served)
	m.panics = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_panics_total", Help: "Panics recovered at a boundary of the daemon, by where: the one request, message, epoch or lease failed and the daemon went on. Each is logged with its stack; any is a bug."}, []string{"where"})
	// Every where exists from the start at 0, so that an alert on an
	// increase sees the first panic; the values are few and fixed, never
	// a peer's or a protocol's name.
	for _, w := range []string{p2p.PanicStream, p2p.PanicGossipValidate, content.PanicBulk, content.PanicBitswap, apiserver.PanicAPI, panicGossipHandle, panicMatch, panicTask, panicLease} {
		m.panics.WithLabelValues(w)
	}
	m.provider.Panics = m.panics.WithLabelValues(panicLease)
	m.submitter.Panics = m.panics.WithLabelValues(panicTask)
	m.reg.MustRegister(m.panics)
	return m
}

// panicked counts a panic recovered at where, one of the values newMetrics
// starts at 0. It is the hook the node gives p2p, content and apiserver.
func (m *metrics) panicked(where string) { m.panics.WithLabelValues(where).Inc() }

// register adds the series that are read from the node when scraped.
func (m *metrics) register(n *Node) {
	gauge := func(name, help string, labels prometheus.Labels, fn func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, fn))
	}
	gauge("e31_gpus", "GPUs of this node, held by a signed lease or free.", prometheus.Labels{"state": "held"}, func() float64 {
		return float64(n.provider.Counts().Held)
	})
	gauge("e31_gpus", "GPUs of this node, held by a signed lease or free.", prometheus.Labels{"state": "free"}, func() float64 {
		c := n.provider.Counts()
		return float64(c.GPUs - c.Held)
	})
	for _, st := range api.JobStates {
		if st == api.JobRejected {
			continue // a refused declaration never becomes a job: e31_jobs_rejected_total counts them
		}
		gauge("e31_jobs", "Jobs submitted from this node, by state.", prometheus.Labels{"state": string(st)}, func() float64 {
			return float64(n.submitter.Counts()[st])
		})
	}
	gauge("e31_leases_active", "Leases this node provides now.", nil, func() float64 {
		return float64(n.provider.Counts().Leases)
	})
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_image_layers_unpacked_total", Help: "Image layers unpacked into the layer cache (a layer found there is not counted)."}, func() float64 {
		return float64(n.images.Stats().Unpacks)
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_image_layer_cache_hits_total", Help: "Image layers found already unpacked in the layer cache."}, func() float64 {
		return float64(n.images.Stats().Hits)
	}))
	for _, r := range []string{p2p.ReasonOversized, p2p.ReasonMalformed, p2p.ReasonUnsigned, p2p.ReasonForged, p2p.ReasonStale, p2p.ReasonReplayed, p2p.ReasonInvalid} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_rejected_total", Help: "Gossip payloads rejected, by reason.", ConstLabels: prometheus.Labels{"reason": r}}, func() float64 {
			return float64(n.gossip.Rejections()[r])
		}))
	}
	m.registerGuard(n.guard)
}

// registerGuard adds the series of the gossip defences: what the per-peer
// limits dropped before validation, and how many peers sit in each score
// band (a peer in "graylist" is being ignored).
func (m *metrics) registerGuard(g *p2p.Guard) {
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

type counterProgress struct{ c prometheus.Counter }

func (p counterProgress) Start(int64, string) {}
func (p counterProgress) Add(n int64)         { p.c.Add(float64(n)) }
func (p counterProgress) Done()               {}

var _ content.Progress = counterProgress{}

// serve serves /metrics on addr until the returned stop is called.
func (m *metrics) serve(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	// Profiles, on the same operator-only address: where a daemon's CPU
	// and memory go under load (go tool pprof http://ADDR/debug/pprof/profile).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve returns ErrServerClosed on Shutdown; any other error means
		// the listener broke and the endpoint is gone, which stop cannot
		// undo.
		srv.Serve(ln) //nolint:errcheck
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx) //nolint:errcheck // closes the listener; nothing to report
		<-done
	}, nil
}

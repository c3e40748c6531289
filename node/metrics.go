package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/p2p"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus series, in a registry of its own so
// that several nodes can share a process (tests).
type metrics struct {
	reg           *prometheus.Registry
	submitted     prometheus.Counter
	leases        prometheus.Counter
	receipts      prometheus.Counter
	bytesStaged   prometheus.Counter
	bytesReturned prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		submitted:     prometheus.NewCounter(prometheus.CounterOpts{Name: "e31_jobs_submitted_total", Help: "Jobs submitted from this node."}),
		leases:        prometheus.NewCounter(prometheus.CounterOpts{Name: "e31_leases_total", Help: "Leases this node signed as provider."}),
		receipts:      prometheus.NewCounter(prometheus.CounterOpts{Name: "e31_receipts_total", Help: "Receipts stored in this node's ledger."}),
		bytesStaged:   prometheus.NewCounter(prometheus.CounterOpts{Name: "e31_bytes_staged_total", Help: "Input bytes fetched to run leases."}),
		bytesReturned: prometheus.NewCounter(prometheus.CounterOpts{Name: "e31_bytes_returned_total", Help: "Output and checkpoint bytes fetched by this submitter."}),
	}
	m.reg.MustRegister(m.submitted, m.leases, m.receipts, m.bytesStaged, m.bytesReturned)
	return m
}

// register adds the series that are read from the node when scraped.
func (m *metrics) register(n *Node) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_gpus", Help: "GPUs of this node.", ConstLabels: prometheus.Labels{"state": "held"}}, func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(len(n.held))
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_gpus", Help: "GPUs of this node.", ConstLabels: prometheus.Labels{"state": "free"}}, func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(len(n.gpus) - len(n.held))
	}))
	for _, st := range []string{stateQueued, stateRenting, stateRunning, stateOutput, stateReleased, stateRejected, stateWithdrawn} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_jobs", Help: "Jobs submitted from this node, by state.", ConstLabels: prometheus.Labels{"state": st}}, func() float64 {
			n.mu.Lock()
			defer n.mu.Unlock()
			c := 0
			for _, j := range n.jobs {
				if j.State == st {
					c++
				}
			}
			return float64(c)
		}))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "e31_leases_active", Help: "Leases this node provides now."}, func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(len(n.leases))
	}))
	for _, r := range []string{p2p.ReasonOversized, p2p.ReasonMalformed, p2p.ReasonUnsigned, p2p.ReasonForged, p2p.ReasonStale, p2p.ReasonReplayed, p2p.ReasonInvalid} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "e31_gossip_rejected_total", Help: "Gossip payloads rejected, by reason.", ConstLabels: prometheus.Labels{"reason": r}}, func() float64 {
			return float64(n.gossip.Rejections()[r])
		}))
	}
}

// staged returns a progress sink that counts input bytes.
func (m *metrics) staged() content.Progress { return counterProgress{m.bytesStaged} }

// returned returns a progress sink that counts output bytes.
func (m *metrics) returned() content.Progress { return counterProgress{m.bytesReturned} }

type counterProgress struct{ c prometheus.Counter }

func (p counterProgress) Start(int64, string) {}
func (p counterProgress) Add(n int64)         { p.c.Add(float64(n)) }
func (p counterProgress) Done()               {}

// serveMetrics serves /metrics on addr until ctx ends.
func (m *metrics) serve(ctx context.Context, addr string) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

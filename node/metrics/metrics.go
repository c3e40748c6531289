package metrics

import (
	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/p2p"
	"github.com/prometheus/client_golang/prometheus"
)

// Where the node recovers a panic in its own work: label values of
// e31_panics_total beside those of the packages it wires (p2p, content,
// apiserver, node/epoch).
const (
	// PanicGossipHandle: applying one accepted gossip message; the
	// message is dropped.
	PanicGossipHandle = "gossip-handle"
	// PanicTask: one of the node's short tasks (a dial, a peer record),
	// or a goroutine of the submitter's (submitter.Metrics.Panics).
	PanicTask = "task"
	// PanicLease: the provider's lease goroutine (provider.Metrics.Panics).
	PanicLease = "lease"
)

// wheres are every label value of e31_panics_total.
var wheres = []string{p2p.PanicStream, p2p.PanicGossipValidate, p2p.PanicRelay, content.PanicBulk, content.PanicBitswap, apiserver.PanicAPI,
	PanicGossipHandle, epoch.PanicMatch, PanicTask, PanicLease}

// Kinds of peer e31_content_served_bytes_total counts bytes served to
// (Registry.Served).
const (
	ToProvider = "provider" // a peer with an offer in the view
	ToOther    = "other"
)

// Registry holds a node's series. Everything in it is set by New and never
// changed after; the series lock themselves.
type Registry struct {
	reg *prometheus.Registry
	// Provider and Submitter are the roles' counters, for their Deps.
	Provider  *provider.Metrics
	Submitter *submitter.Metrics
	// served counts bytes served over the bulk protocol, by kind of peer.
	served *prometheus.CounterVec
	// refused counts the direct-stream requests this node refused with a
	// code, by protocol and code.
	refused *prometheus.CounterVec
	// panics counts the panics recovered where one unit of work (a stream
	// request, a gossip message, an API request, a lease) failed and the
	// daemon went on. Each is logged with its stack; any is a bug.
	panics *prometheus.CounterVec
}

// New returns a registry holding every series counted into; Register adds
// those read from the node's parts.
func New() *Registry {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	receipts := counter("e31_receipts_total", "Receipts stored in this node's ledger.")
	persist := counter("e31_persist_errors_total", "Writes of job or lease records that failed (each also logged).")
	m := &Registry{
		reg: prometheus.NewRegistry(),
		Provider: &provider.Metrics{
			Leases:        counter("e31_leases_total", "Leases this node signed as provider."),
			Receipts:      receipts,
			PersistErrors: persist,
		},
		Submitter: &submitter.Metrics{
			Submitted:     counter("e31_jobs_submitted_total", "Jobs submitted from this node."),
			Rejected:      counter("e31_jobs_rejected_total", "Declarations refused at submit."),
			RoundsLost:    counter("e31_match_rounds_lost_total", "Epochs whose Match on this node assigned one of its queued jobs to a provider, the job still queued at the next epoch's pass: rounds lost, most often to views that differ between peers."),
			Receipts:      receipts,
			PersistErrors: persist,
		},
	}
	staged := counter("e31_bytes_staged_total", "Input bytes fetched to run leases.")
	returned := counter("e31_bytes_returned_total", "Output and checkpoint bytes fetched by this submitter.")
	m.Provider.Staged = counterProgress{staged}
	m.Submitter.Returned = counterProgress{returned}
	prestaged := counter("e31_bytes_prestaged_total", "Input bytes fetched before a lease, for a job Match reserved this node for (off the meter).")
	m.Provider.Prestaged = counterProgress{prestaged}
	m.Provider.Fetched = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_content_fetched_bytes_total", Help: "Input bytes this provider fetched, by kind of source (submitter or provider)."}, []string{"from"})
	m.Provider.ThroughRelay = counter("e31_fetches_through_relay_total", "Fetches from a submitter this provider made through a relay that carries data, for want of a direct connection.")
	m.served = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_content_served_bytes_total", Help: "Bytes this node served to peers over the bulk protocol, by kind of peer (provider: a peer with an offer; other)."}, []string{"to"})
	m.reg.MustRegister(m.Submitter.Submitted, m.Submitter.Rejected, m.Submitter.RoundsLost, m.Provider.Leases, receipts, persist, staged, returned, prestaged, m.Provider.Fetched, m.Provider.ThroughRelay, m.served)
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_refused_total", Help: "Direct-stream requests this node refused with a code (node/wire's refusal codes), by protocol and code: a peer's claim this node did not believe (a proposal Match never gave it, a receipt past its lease, a stage it was not reserved), or a request it could not serve in the state it was in."}, []string{"proto", "code"})
	m.reg.MustRegister(m.refused)
	m.panics = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e31_panics_total", Help: "Panics recovered at a boundary of the daemon, by where: the one request, message, epoch or lease failed and the daemon went on. Each is logged with its stack; any is a bug."}, []string{"where"})
	for _, w := range wheres {
		m.panics.WithLabelValues(w)
	}
	m.Provider.Panics = m.panics.WithLabelValues(PanicLease)
	m.Submitter.Panics = m.panics.WithLabelValues(PanicTask)
	m.reg.MustRegister(m.panics)
	return m
}

// Panicked counts a panic recovered at where, one of the values New starts
// at 0. It is the hook the node gives p2p, content, apiserver and
// node/epoch.
func (m *Registry) Panicked(where string) { m.panics.WithLabelValues(where).Inc() }

// Refused counts a direct-stream request of proto refused with code.
func (m *Registry) Refused(proto, code string) { m.refused.WithLabelValues(proto, code).Inc() }

// Served counts bytes served over the bulk protocol to a peer of the kind
// to (ToProvider or ToOther).
func (m *Registry) Served(to string, bytes int64) { m.served.WithLabelValues(to).Add(float64(bytes)) }

// Gatherer is what a scrape reads.
func (m *Registry) Gatherer() prometheus.Gatherer { return m.reg }

// Registerer is where a part that keeps its own series (libp2p's relay
// service) registers them.
func (m *Registry) Registerer() prometheus.Registerer { return m.reg }

type counterProgress struct{ c prometheus.Counter }

func (p counterProgress) Start(int64, string) {}
func (p counterProgress) Add(n int64)         { p.c.Add(float64(n)) }
func (p counterProgress) Done()               {}

var _ content.Progress = counterProgress{}

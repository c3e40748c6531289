package scale

import "sort"

// The cost model of one peer against the network's size, as of
// 2026-12-03 (see the package doc): its measured inputs, marked M in the
// model, and its assumptions, A. Prediction is what it says a peer pays.
const (
	modelHeartbeat   = 10.0   // A: s between a provider's offers
	modelCopies      = 6.3    // M: copies of each unique message a peer receives (and sends), D = 6
	modelPerCopy     = 29e-6  // M: CPU s per copy sent and received, fixed part
	modelPerCopyByte = 3.0e-9 // M: CPU s per copy, per byte
	modelFraming     = 1.04   // A: transport framing over gossip bytes
	modelConnected   = 48     // A: topic peers a peer's own offer is flood-published to
	modelIHaveTo     = 10     // A: IHAVE targets per heartbeat
	modelQueueWait   = 30.0   // A: s a job waits queued (open jobs Q = 30 J)
	modelOffersByJob = 2      // A: offers a job causes (GPUs held and freed)
	modelOpenJob     = 2171   // M: bytes of an open job in memory
	modelLiveLease   = 944    // M: bytes of a live lease
	modelPastLease   = 700    // M: bytes of a released lease kept for the usage window
	modelProvider    = 6894 + 1000
	modelUsageWindow = 28800 // s of leases kept for usage (8 h)
)

// matchFit is Match's ms per pass, a + b·Q, and the view's cut in ms, at
// n providers (M); between them N is interpolated linearly.
type matchFit struct{ n, a, b, cut float64 }

func matchFits() []matchFit {
	return []matchFit{
		{100, 0.35, 0.41e-3, 0.07},
		{1000, 2.65, 0.60e-3, 0.72},
		{10000, 21.3, 1.9e-3, 7.0},
		{100000, 285, 3.5e-3, 132},
	}
}

// Prediction is what the model says one peer pays in a network of
// Providers providers and JobsPerS jobs a second, with no holdings in the
// offers.
type Prediction struct {
	UniquePerS  float64 `json:"unique_msgs_per_s"`
	Copies      float64 `json:"copies_per_msg"`
	BytesInPerS float64 `json:"peer_bytes_in_per_s"`
	// BytesOutPerS includes the peer's own offer, flood-published.
	BytesOutPerS float64 `json:"peer_bytes_out_per_s"`
	CPUCores     float64 `json:"peer_cpu_cores"`
	RSSBytes     float64 `json:"peer_rss_bytes"`
	MatchMs      float64 `json:"match_ms"`
	CutMs        float64 `json:"cut_ms"`
	// DepartureS is how long until a silent provider leaves a view: three
	// missed heartbeats.
	DepartureS float64 `json:"departure_detect_s"`
}

// Predict runs the model for n providers and j jobs a second.
func Predict(n, j float64) Prediction {
	// Wire sizes (M, bytes on the gossip stream) and first-copy CPU (M, s:
	// open, validate, decode, apply to the view) of each kind of message,
	// an offer without holdings.
	modelSize := map[string]float64{"offer": 1886, "declaration": 1342, "lease": 879, "release": 588, "requeue": 1762}
	modelFirst := map[string]float64{"offer": 90e-6, "declaration": 94e-6, "lease": 144e-6, "release": 54e-6, "requeue": 35e-6}
	rates := map[string]float64{"offer": n/modelHeartbeat + modelOffersByJob*j, "declaration": j, "lease": j, "release": j, "requeue": j * modelQueueWait / 30}
	var uniq, bytes, cpu float64
	for k, r := range rates {
		uniq += r
		bytes += r * modelSize[k]
		cpu += r * (modelFirst[k] + modelCopies*(modelPerCopy+modelPerCopyByte*modelSize[k]))
	}
	gossip := modelCopies * bytes * modelFraming
	own := modelConnected * modelSize["offer"] / modelHeartbeat * modelFraming
	rOffer := rates["offer"]
	ihave := modelIHaveTo * 34 * (min(3*rOffer, 5000) + min(3*(3*j+j/36), 5000))
	cpu += modelIHaveTo * (min(3*rOffer, 5000) + min(9*j, 5000)) * 100e-9

	q := modelQueueWait * j
	a, b, cut := matchAt(n)
	match := a + b*q
	past := modelUsageWindow * j
	cpu += (cut+match)/1e3 + past*54e-9 // one pass a second, and Prune over the kept leases

	live := min(j*3600, 4*n)
	mem := n*modelProvider + q*modelOpenJob + live*modelLiveLease + past*modelPastLease + 5*bytes + uniq*20e3
	return Prediction{UniquePerS: uniq, Copies: modelCopies, BytesInPerS: gossip + ihave, BytesOutPerS: gossip + own + ihave,
		CPUCores: cpu, RSSBytes: mem, MatchMs: match, CutMs: cut, DepartureS: 3 * modelHeartbeat}
}

// matchAt interpolates the Match fit and the cut at n providers, holding
// the ends beyond the measured range.
func matchAt(n float64) (a, b, cut float64) {
	m := matchFits()
	i := sort.Search(len(m), func(i int) bool { return m[i].n >= n })
	switch {
	case i == 0:
		return m[0].a * n / m[0].n, m[0].b, m[0].cut * n / m[0].n
	case i == len(m):
		last := m[len(m)-1]
		f := n / last.n
		return last.a * f, last.b, last.cut * f
	}
	lo, hi := m[i-1], m[i]
	f := (n - lo.n) / (hi.n - lo.n)
	return lo.a + f*(hi.a-lo.a), lo.b + f*(hi.b-lo.b), lo.cut + f*(hi.cut-lo.cut)
}

package submitter

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// servedRate keeps, for each peer, what this node served it over the bulk
// protocol in the last few seconds: while a job's provider stages its
// inputs from here, the job's status says how fast they move, and by what
// path ("staging through relay R, 12.3 MiB/s").
type servedRate struct {
	mu  sync.Mutex // guards per; a state lock
	per map[peer.ID]*rateWindow
}

// rateSeconds is the window a rate is taken over: long enough to smooth
// the bursts of a transfer, short enough to follow a stall.
const rateSeconds = 4

// rateWindow holds one peer's bytes by second, in a ring.
type rateWindow struct {
	sec   [rateSeconds]int64 // the Unix second each slot counts
	bytes [rateSeconds]int64
}

// add counts n bytes served to p at now.
func (s *servedRate) add(p peer.ID, n int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.per == nil {
		s.per = map[peer.ID]*rateWindow{}
	}
	w := s.per[p]
	if w == nil {
		if len(s.per) > maxRatePeers {
			s.pruneLocked(now)
		}
		w = &rateWindow{}
		s.per[p] = w
	}
	sec := now.Unix()
	i := sec % rateSeconds
	if w.sec[i] != sec {
		w.sec[i], w.bytes[i] = sec, 0
	}
	w.bytes[i] += n
}

// maxRatePeers bounds the peers kept; past it, idle ones go.
const maxRatePeers = 4096

// pruneLocked drops the peers served nothing within the window.
func (s *servedRate) pruneLocked(now time.Time) {
	for p, w := range s.per {
		if w.rate(now) == 0 {
			delete(s.per, p)
		}
	}
}

// rate is what p was served, in bytes a second, over the window up to
// now; 0 when nothing.
func (s *servedRate) rate(p peer.ID, now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.per[p]; w != nil {
		return w.rate(now)
	}
	return 0
}

func (w *rateWindow) rate(now time.Time) float64 {
	sec := now.Unix()
	var sum int64
	for i := range rateSeconds {
		if sec-w.sec[i] < rateSeconds {
			sum += w.bytes[i]
		}
	}
	return float64(sum) / rateSeconds
}

// Served tells the submitter that n bytes were served to peer to over the
// bulk protocol (content.ExchangeOptions.Served).
func (s *Submitter) Served(to peer.ID, n int64) { s.served.add(to, n, time.Now()) }

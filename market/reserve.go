package market

import (
	"cmp"
	"slices"
)

// Reservations. A job that cannot start now, among the first K such jobs
// of the pass, reserves the provider whose running leases free enough for
// it earliest. Leases end at their declared limits (the provider enforces
// them), so that instant is known now. From then on in the pass the provider
// is out of the index: later jobs may use it only as backfill, when their
// own limit ends before the reservation starts (see place).
//
// A provider with contribution hours is reserved for a job only if the
// job's limit, counted from the reservation's start, ends by the offer's
// OpenUntil: the job would otherwise be waiting for room that its window
// gives back too late to use. A closed provider, like a draining one, is
// never reserved: its couldEverFit fails.
//
// Match keeps no state between passes: the reservation is found again next
// pass. It holds because nothing placed on the provider meanwhile outlasts
// it, so the provider's earliest instant for the job can only stay or move
// earlier, and the job, being ahead of those that could take the provider
// otherwise, reserves it (or a better one) again.

// holdFor reserves a provider for j, which found no room now, while fewer
// than K jobs and gangs hold one, and records the reservation.
func (m *matcher) holdFor(j *jobState) {
	if m.holds >= m.k {
		return
	}
	if p := m.reserve(j); p != nil {
		m.holds++
		m.res.Reservations = append(m.res.Reservations, Reservation{Job: j.id, Provider: p.id, From: p.res.from})
	}
}

// reserve picks and marks the provider to reserve for j, or returns nil
// when no provider will ever have room for it.
func (m *matcher) reserve(j *jobState) *provider {
	s := j.shape
	if s.noReserve {
		return nil
	}
	var best *provider
	var bestAt int64
	var bestW uint64
	key := j.h
	for i := range m.provs {
		p := &m.provs[i]
		if p.res != nil || !m.couldEverFit(&s.demand, p) || m.avoids(j, p) {
			continue
		}
		at := p.earliest(&s.demand, m.now)
		if at == never || p.static.openUntil != 0 && satAdd(at, int64(j.limit)) > p.static.openUntil {
			continue
		}
		w := m.ix.arena.hash[p.idx] ^ key
		// The earliest, then the cheaper, then the rendezvous weight.
		if best == nil || at < bestAt || at == bestAt && (p.static.price < best.static.price ||
			p.static.price == best.static.price && (w < bestW || w == bestW && p.idx < best.idx)) {
			best, bestAt, bestW = p, at, w
		}
	}
	if best == nil && j.avoid == 0 {
		// Reserving only removes providers and placing only adds leases, so
		// the same request finds nothing for the rest of the pass. Where
		// windows count, the request includes the limit (shapeOf), and an
		// instant that only moves later ends no earlier.
		s.noReserve = true
		return nil
	}
	if best == nil {
		return nil
	}
	best.res = &reservation{job: j, from: bestAt}
	j.res = best
	if best.class != nil {
		m.ix.remove(best)
	}
	m.reserved = append(m.reserved, best)
	return best
}

// couldEverFit applies the filters to the offer as if everything on it were
// free.
func (m *matcher) couldEverFit(d *demand, p *provider) bool {
	m.empty = shape{static: p.static, avail: p.static.gpus, cpus: p.static.cpus, mem: p.static.mem}
	return firstFailure(&m.filters, d, &m.empty) == ""
}

// earliest returns when p will have d free, counting the leases on it
// (including those this pass just made) as ending at their limits, or never.
func (p *provider) earliest(d *demand, now int64) int64 {
	at := now
	if d.gpus > 0 {
		var buf [64]int64
		times := buf[:0]
		for _, sl := range p.slots {
			if sl.freeAt != never && d.con.satisfies(sl.typ) {
				times = append(times, sl.freeAt)
			}
		}
		if len(times) < d.gpus {
			return never
		}
		slices.Sort(times)
		at = max(at, times[d.gpus-1])
	}
	if p.shape.cpus >= d.cpus && p.shape.mem >= d.mem {
		return at
	}
	if !p.sorted {
		slices.SortFunc(p.events, func(a, b event) int { return cmp.Compare(a.end, b.end) })
		p.sorted = true
	}
	cpus, mem := p.shape.cpus, p.shape.mem
	for _, e := range p.events {
		if cpus >= d.cpus && mem >= d.mem {
			break
		}
		cpus += e.cpus
		mem = satAddUint(mem, e.mem)
		at = max(at, e.end)
	}
	if cpus < d.cpus || mem < d.mem {
		return never
	}
	return at
}

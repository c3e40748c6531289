package hours

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrSpec is returned, wrapped, for a spec that Parse cannot read.
var ErrSpec = errors.New("bad contribution hours")

// specError names the window at fault and what is wanted. Its text stands
// alone, for the contributor who typed the flag; errors.Is(err, ErrSpec)
// is how a caller tells it from other errors.
type specError struct {
	window string
	msg    string
}

func (e *specError) Error() string { return fmt.Sprintf("hours %q: %s", e.window, e.msg) }
func (e *specError) Unwrap() error { return ErrSpec }

const (
	dayMinutes  = 24 * 60
	weekMinutes = 7 * dayMinutes
	weekWords   = (weekMinutes + 63) / 64

	// allDays is the day mask of daily.
	allDays = 1<<7 - 1

	// maxTransitions bounds how many zone transitions next crosses before
	// it gives up. Real zones change offset at most a few times a year; a
	// walk that never finds its state for this many is in no real zone.
	maxTransitions = 64
)

// Schedule is a week of contribution hours, to the minute of the wall
// clock: a minute of the week is open or closed. Overlapping and touching
// windows are one stretch of open time. It is a value, safe to copy and
// compare with ==. The zero Schedule is never open; Parse never returns
// it, so a caller may hold it to mean that no hours were given (a node
// without hours is open all the time, which is not what it answers).
type Schedule struct {
	// open has bit m set when minute m of the week is open, minute 0
	// being Monday 00:00.
	open [weekWords]uint64
}

// dayNames are the canonical names, Monday first as in ISO 8601.
func dayNames() [7]string { return [7]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"} }

const wantDays = "want Mon..Sun, a range Mon-Fri or a list Sat,Sun"

// Parse reads contribution hours: windows separated by ";", each
// "DAYS START-END".
//
// DAYS is a day (Mon … Sun or Monday … Sunday, in any case), a range
// Mon-Fri (which may wrap: Fri-Mon is Fri, Sat, Sun and Mon), a comma list
// Sat,Sun, a mix of the two (Mon,Wed-Fri), or daily. START and END are
// HH:MM on the 24-hour clock; END may be 24:00. A window whose END is not
// after its START runs past midnight into the next day: "Mon 19:00-07:30"
// is Monday 19:00 to Tuesday 07:30. START equal to END is an error, since
// a window of no time is surely a typing mistake (a whole day is
// 00:00-24:00).
//
// An empty spec is an error too: a node without contribution hours has no
// Schedule at all. Every error wraps ErrSpec and names the window at
// fault.
func Parse(spec string) (Schedule, error) {
	var s Schedule
	n := 0
	for _, w := range strings.Split(spec, ";") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue // a trailing ";" or one doubled says nothing
		}
		if err := s.add(w); err != nil {
			return Schedule{}, err
		}
		n++
	}
	if n == 0 {
		return Schedule{}, &specError{spec, `no window: want DAYS START-END, such as "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00"`}
	}
	return s, nil
}

// add opens the minutes of one window.
func (s *Schedule) add(w string) error {
	f := strings.Fields(w)
	if len(f) == 1 {
		if _, _, err := parseSpan(f[0]); err == nil {
			// Hours with no days: most likely meant for every day.
			return &specError{w, fmt.Sprintf("no days: for every day write %q, or name the days, such as \"Mon-Fri %s\"", "daily "+f[0], f[0])}
		}
	}
	if len(f) == 2 {
		if _, _, err := parseSpan(f[0]); err == nil {
			if _, err := parseDays(f[1]); err == nil {
				return &specError{w, fmt.Sprintf("days come first: %q", f[1]+" "+f[0])}
			}
		}
	}
	if len(f) != 2 {
		return &specError{w, "want DAYS START-END, such as Mon-Fri 19:00-07:30, or daily 19:00-07:30 for every day"}
	}
	days, err := parseDays(f[0])
	if err != nil {
		return &specError{w, err.Error()}
	}
	start, length, err := parseSpan(f[1])
	if err != nil {
		return &specError{w, err.Error()}
	}
	for d := range 7 {
		if days&(1<<d) != 0 {
			s.set(d*dayMinutes+start, length)
		}
	}
	return nil
}

// parseDays returns DAYS as a mask, bit 0 for Monday.
func parseDays(f string) (uint8, error) {
	var mask uint8
	for item := range strings.SplitSeq(f, ",") {
		if strings.EqualFold(item, "daily") {
			mask = allDays
			continue
		}
		a, b, isRange := strings.Cut(item, "-")
		from, err := parseDay(a)
		if err != nil {
			return 0, err
		}
		to := from
		if isRange {
			if to, err = parseDay(b); err != nil {
				return 0, err
			}
		}
		for d := from; ; d = (d + 1) % 7 {
			mask |= 1 << d
			if d == to {
				break
			}
		}
	}
	return mask, nil
}

// parseDay reads one day's name, abbreviated or in full, in any case.
func parseDay(name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("missing day: %s", wantDays)
	}
	for d, short := range dayNames() {
		if strings.EqualFold(name, short) || strings.EqualFold(name, fullDay(d)) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown day %q: %s", name, wantDays)
}

// fullDay is the English name of day d, Monday being 0.
func fullDay(d int) string { return time.Weekday((d + 1) % 7).String() }

// parseSpan reads START-END and returns the window's first minute of the
// day and its length in minutes.
func parseSpan(f string) (start, length int, err error) {
	a, b, ok := strings.Cut(f, "-")
	if !ok {
		return 0, 0, fmt.Errorf("times %q: want START-END as HH:MM-HH:MM, such as 19:00-07:30", f)
	}
	start, ok = parseClock(a, false)
	if !ok {
		return 0, 0, fmt.Errorf("start %q: want HH:MM from 00:00 to 23:59", a)
	}
	end, ok := parseClock(b, true)
	if !ok {
		return 0, 0, fmt.Errorf("end %q: want HH:MM from 00:00 to 24:00", b)
	}
	switch {
	case end == start:
		return 0, 0, fmt.Errorf("empty window: it starts and ends at %s (a whole day is 00:00-24:00)", clock(start))
	case end < start:
		return start, dayMinutes - start + end, nil // past midnight
	}
	return start, end - start, nil
}

// parseClock reads H:MM or HH:MM as minutes since midnight; 24:00 only
// with end.
func parseClock(c string, end bool) (int, bool) {
	h, m, ok := strings.Cut(c, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, false
	}
	hh, _ := strconv.Atoi(h)
	mm, _ := strconv.Atoi(m)
	switch {
	case mm > 59, hh > 24, hh == 24 && (!end || mm != 0):
		return 0, false
	}
	return hh*60 + mm, true
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// set opens n minutes from minute from of the week (0 ≤ from < week,
// 0 < n ≤ week), wrapping past Sunday into Monday.
func (s *Schedule) set(from, n int) {
	for n > 0 {
		hi := min(from+n, weekMinutes)
		for m := from; m < hi; {
			if m%64 == 0 && hi-m >= 64 {
				s.open[m/64] = ^uint64(0)
				m += 64
				continue
			}
			s.open[m/64] |= 1 << (m % 64)
			m++
		}
		n -= hi - from
		from = 0
	}
}

// at reports whether minute m of the week is open.
func (s *Schedule) at(m int) bool { return s.open[m/64]>>(m%64)&1 != 0 }

// has reports whether some minute of the week is open (or, with open
// false, closed).
func (s *Schedule) has(open bool) bool {
	for i, w := range s.open {
		if !open {
			w = ^w
			if i == weekWords-1 {
				w &= 1<<(weekMinutes%64) - 1 // bits past the week
			}
		}
		if w != 0 {
			return true
		}
	}
	return false
}

// minuteOfWeek is t's minute of the week on t's own wall clock.
func minuteOfWeek(t time.Time) int {
	d := (int(t.Weekday()) + 6) % 7 // Monday 0
	return d*dayMinutes + t.Hour()*60 + t.Minute()
}

// Open reports whether t falls in a window, on the wall clock of t's
// location.
func (s Schedule) Open(t time.Time) bool { return s.at(minuteOfWeek(t)) }

// Closes returns when the stretch of open time that t is in ends: the
// first instant after t whose wall-clock minute is closed, in t's
// location. Windows that overlap or touch are one stretch: Fri 19:00-07:30
// followed by Sat and Sun 00:00-24:00 closes on Monday at 00:00. It returns
// the zero Time when t is not in a window, and also when the schedule is
// open all week, since it then never closes.
//
// On a day the clocks change, windows follow the wall clock (see the
// package documentation): a window across the spring gap is an hour
// shorter, one across the autumn's repeated hour an hour longer, and one
// that ends inside the repeated hour closes there the first time and opens
// again when the clock goes back, until the clock reaches its end again.
func (s Schedule) Closes(t time.Time) time.Time {
	if !s.Open(t) {
		return time.Time{}
	}
	return s.next(t, false)
}

// Opens returns when the next window opens after t: the first instant
// after t whose wall-clock minute is open and follows a closed one, in t's
// location. When t is in a window, that is the start of the window after
// it closes. It returns the zero Time when no window ever opens: the
// schedule is open all week, or is the zero Schedule.
func (s Schedule) Opens(t time.Time) time.Time {
	if s.Open(t) {
		c := s.next(t, false)
		if c.IsZero() {
			return time.Time{}
		}
		t = c
	}
	return s.next(t, true)
}

// next returns the first instant from t on whose wall-clock minute is open
// (or, with open false, closed), or the zero Time if there is none.
//
// Instants are never stepped a day or a minute at a time: the wall clock
// jumps when the zone's offset changes, and 24 hours is not a day on the
// day it does. Within one zone, between two of its transitions, the wall
// clock runs with the instant, so the wanted minute k wall minutes ahead
// is k minutes ahead; if that lies past the zone's end, the walk resumes
// at the transition, on the clock as it then reads. A walk that crosses
// maxTransitions transitions without finding the minute gives up and
// returns the zero Time, which no real zone makes it do.
func (s Schedule) next(t time.Time, open bool) time.Time {
	if !s.has(open) {
		return time.Time{}
	}
	u := t.Round(0) // an instant on the wall clock; a monotonic reading means nothing here
	for range maxTransitions {
		m := minuteOfWeek(u)
		if s.at(m) == open {
			return u
		}
		k := 1
		for s.at((m+k)%weekMinutes) != open {
			k++ // has(open) and s.at(m) != open: found within the week
		}
		into := time.Duration(u.Second())*time.Second + time.Duration(u.Nanosecond())
		b := u.Add(time.Duration(k)*time.Minute - into)
		_, end := u.ZoneBounds()
		if end.IsZero() || b.Before(end) {
			return b
		}
		u = end
	}
	return time.Time{}
}

// String returns the canonical form of the schedule, which Parse reads back
// to the same Schedule. It describes the week's stretches of open time,
// not the windows as they were written: each stretch is cut at midnight
// into windows of at most a day (one that starts after midnight runs past
// the next one only if it ends before its start time), and windows with
// the same times are listed once, with their days, in the order of the
// week. "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00" reads back as
// "Mon-Thu 19:00-07:30; Fri 19:00-24:00; Sat,Sun 00:00-24:00". A schedule
// open all week is "daily 00:00-24:00"; the zero Schedule is "".
func (s Schedule) String() string {
	if !s.has(true) {
		return ""
	}
	if !s.has(false) {
		return "daily 00:00-24:00"
	}
	type window struct{ day, start, end int } // end < start: past midnight
	var ws []window
	// Stretches are found from a closed minute on, so that none is cut at
	// the end of the week.
	c := 0
	for s.at(c) {
		c++
	}
	for i := 1; i < weekMinutes; {
		if !s.at((c + i) % weekMinutes) {
			i++
			continue
		}
		// Minute c is closed, so the stretch ends before the walk comes
		// round to it again.
		n := 0
		for s.at((c + i + n) % weekMinutes) {
			n++
		}
		i += n
		for x := c + i - n; n > 0; {
			day, tod := x/dayMinutes%7, x%dayMinutes
			toMidnight := dayMinutes - tod
			switch {
			case n <= toMidnight:
				ws = append(ws, window{day, tod, tod + n})
				x, n = x+n, 0
			case tod != 0 && n-toMidnight < tod:
				ws = append(ws, window{day, tod, n - toMidnight})
				x, n = x+n, 0
			default:
				ws = append(ws, window{day, tod, dayMinutes})
				x, n = x+toMidnight, n-toMidnight
			}
		}
	}
	slices.SortFunc(ws, func(a, b window) int {
		if a.day != b.day {
			return a.day - b.day
		}
		return a.start - b.start
	})
	type group struct {
		start, end int
		days       uint8
	}
	var gs []group
	for _, w := range ws {
		i := slices.IndexFunc(gs, func(g group) bool { return g.start == w.start && g.end == w.end })
		if i < 0 {
			gs = append(gs, group{start: w.start, end: w.end})
			i = len(gs) - 1
		}
		gs[i].days |= 1 << w.day
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = formatDays(g.days) + " " + clock(g.start) + "-" + clock(g.end)
	}
	return strings.Join(parts, "; ")
}

// formatDays writes a day mask: daily, or runs of days in the order of the
// week, three or more as a range (which may wrap past Sunday), two as a
// list.
func formatDays(mask uint8) string {
	if mask == allDays {
		return "daily"
	}
	names := dayNames()
	in := func(d int) bool { return mask&(1<<(d%7)) != 0 }
	// Runs are found from a day not in the mask, so that none is cut at
	// Sunday.
	z := 0
	for in(z) {
		z++
	}
	type run struct{ from, n int }
	var runs []run
	for d := z + 1; d <= z+7; d++ {
		if !in(d) {
			continue
		}
		if len(runs) > 0 && runs[len(runs)-1].from+runs[len(runs)-1].n == d {
			runs[len(runs)-1].n++
		} else {
			runs = append(runs, run{d, 1})
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return a.from%7 - b.from%7 })
	var parts []string
	for _, r := range runs {
		first, last := names[r.from%7], names[(r.from+r.n-1)%7]
		switch r.n {
		case 1:
			parts = append(parts, first)
		case 2:
			parts = append(parts, first+","+last)
		default:
			parts = append(parts, first+"-"+last)
		}
	}
	return strings.Join(parts, ",")
}

// clock writes minutes since midnight as HH:MM, 1440 as 24:00.
func clock(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

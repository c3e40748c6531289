package hours

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases must not depend on the machine's zoneinfo

	"pgregory.net/rapid"
)

func TestParseCanonical(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00", "Mon-Thu 19:00-07:30; Fri 19:00-24:00; Sat,Sun 00:00-24:00"},
		{"daily 09:00-17:00", "daily 09:00-17:00"},
		{"DAILY 00:00-24:00", "daily 00:00-24:00"},
		{"Mon-Sun 00:00-24:00", "daily 00:00-24:00"},
		{"Mon-Sun 12:00-12:01; daily 12:01-12:00", "daily 00:00-24:00"},
		{"monday,TUESDAY,wed 9:00-17:00", "Mon-Wed 09:00-17:00"},
		{"Fri-Mon 09:00-17:00", "Fri-Mon 09:00-17:00"},
		{"Sat,Mon 10:00-11:00", "Mon,Sat 10:00-11:00"},
		{"Sun,Mon 10:00-11:00", "Sun,Mon 10:00-11:00"},
		{"Mon,Wed-Fri 08:00-09:00", "Mon,Wed-Fri 08:00-09:00"},
		{"Sun-Sun 08:00-09:00", "Sun 08:00-09:00"},
		{"Mon 09:00-12:00; Mon 11:00-14:00", "Mon 09:00-14:00"},
		{"Mon 09:00-12:00; Mon 12:00-14:00", "Mon 09:00-14:00"},
		{"Mon 09:00-12:00;; Tue 09:00-12:00;", "Mon,Tue 09:00-12:00"},
		{"Sun 22:00-02:00", "Sun 22:00-02:00"},
		{"Mon 19:00-00:00", "Mon 19:00-24:00"},
		{"Mon 00:00-24:00; Tue 00:00-12:00", "Mon 00:00-24:00; Tue 00:00-12:00"},
		{"Mon 10:00-09:59", "Mon 10:00-09:59"},
		// A whole day from mid-day is two windows: one from 10:00 to 10:00
		// would be empty.
		{"Mon 10:00-24:00; Tue 00:00-10:00", "Mon 10:00-24:00; Tue 00:00-10:00"},
		{"Mon 10:00-04:00; Tue 04:00-10:00", "Mon 10:00-24:00; Tue 00:00-10:00"},
		{"  Tue   23:59-00:01  ", "Tue 23:59-00:01"},
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		if got := s.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q, want %q", c.spec, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"", `hours "": no window: want DAYS START-END, such as "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00"`},
		{" ; ", `hours " ; ": no window: want DAYS START-END, such as "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00"`},
		{"Mon-Fry 19:00-07:30", `hours "Mon-Fry 19:00-07:30": unknown day "Fry": want Mon..Sun, a range Mon-Fri or a list Sat,Sun`},
		{"Sat,Sun 00:00-24:00; Mo 09:00-10:00", `hours "Mo 09:00-10:00": unknown day "Mo": want Mon..Sun, a range Mon-Fri or a list Sat,Sun`},
		{"Mon,,Tue 10:00-11:00", `hours "Mon,,Tue 10:00-11:00": missing day: want Mon..Sun, a range Mon-Fri or a list Sat,Sun`},
		{"Mon- 10:00-11:00", `hours "Mon- 10:00-11:00": missing day: want Mon..Sun, a range Mon-Fri or a list Sat,Sun`},
		{"daily-Fri 10:00-11:00", `hours "daily-Fri 10:00-11:00": unknown day "daily": want Mon..Sun, a range Mon-Fri or a list Sat,Sun`},
		{"19:00-07:30", `hours "19:00-07:30": no days: for every day write "daily 19:00-07:30", or name the days, such as "Mon-Fri 19:00-07:30"`},
		{"08:00-09:00", `hours "08:00-09:00": no days: for every day write "daily 08:00-09:00", or name the days, such as "Mon-Fri 08:00-09:00"`},
		{"08:00-09:00 Sat,Sun", `hours "08:00-09:00 Sat,Sun": days come first: "Sat,Sun 08:00-09:00"`},
		{"Mon - Fri 19:00-07:30", `hours "Mon - Fri 19:00-07:30": want DAYS START-END, such as Mon-Fri 19:00-07:30, or daily 19:00-07:30 for every day`},
		{"Mon", `hours "Mon": want DAYS START-END, such as Mon-Fri 19:00-07:30, or daily 19:00-07:30 for every day`},
		{"Mon 10:00", `hours "Mon 10:00": times "10:00": want START-END as HH:MM-HH:MM, such as 19:00-07:30`},
		{"Mon 9-17", `hours "Mon 9-17": start "9": want HH:MM from 00:00 to 23:59`},
		{"Mon 24:00-07:00", `hours "Mon 24:00-07:00": start "24:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 10:60-11:00", `hours "Mon 10:60-11:00": start "10:60": want HH:MM from 00:00 to 23:59`},
		{"Mon 10:00-24:30", `hours "Mon 10:00-24:30": end "24:30": want HH:MM from 00:00 to 24:00`},
		{"Mon 10:00-1:5", `hours "Mon 10:00-1:5": end "1:5": want HH:MM from 00:00 to 24:00`},
		{"Mon 10:00-+1:00", `hours "Mon 10:00-+1:00": end "+1:00": want HH:MM from 00:00 to 24:00`},
		{"Mon 09:00-09:00", `hours "Mon 09:00-09:00": empty window: it starts and ends at 09:00 (a whole day is 00:00-24:00)`},
		{"Mon 00:00-00:00", `hours "Mon 00:00-00:00": empty window: it starts and ends at 00:00 (a whole day is 00:00-24:00)`},
	} {
		_, err := Parse(c.spec)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want %s", c.spec, c.want)
			continue
		}
		if !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q): %v does not wrap ErrSpec", c.spec, err)
		}
		if err.Error() != c.want {
			t.Errorf("Parse(%q):\n got %s\nwant %s", c.spec, err, c.want)
		}
	}
}

// zone is a fixed zone with an offset that is not whole hours, so that a
// computation done in UTC by mistake shows.
var zone = time.FixedZone("test", -(3*3600 + 30*60))

// monday is a Monday at 00:00 in zone.
var monday = time.Date(2026, 1, 5, 0, 0, 0, 0, zone)

// at is a time in the week starting monday: day 0 is Monday.
func at(day, h, m int) time.Time { return time.Date(2026, 1, 5+day, h, m, 0, 0, zone) }

func TestOpenCloses(t *testing.T) {
	evenings := "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00"
	var never time.Time
	for _, c := range []struct {
		spec          string
		t             time.Time
		open          bool
		closes, opens time.Time
	}{
		{evenings, at(0, 18, 59), false, never, at(0, 19, 0)},
		{evenings, at(0, 19, 0), true, at(1, 7, 30), at(1, 19, 0)},
		{evenings, at(1, 7, 29).Add(59 * time.Second), true, at(1, 7, 30), at(1, 19, 0)},
		{evenings, at(1, 7, 30), false, never, at(1, 19, 0)},
		// The Friday evening runs into the weekend without a break.
		{evenings, at(4, 20, 0), true, at(7, 0, 0), at(7, 19, 0)},
		{evenings, at(6, 23, 59), true, at(7, 0, 0), at(7, 19, 0)},
		{evenings, at(7, 0, 0), false, never, at(7, 19, 0)},
		// A window on Sunday evening runs into Monday, across the week's end.
		{"Sun 22:00-02:00", at(6, 23, 0), true, at(7, 2, 0), at(13, 22, 0)},
		{"Sun 22:00-02:00", at(0, 1, 0), true, at(0, 2, 0), at(6, 22, 0)},
		{"Fri-Mon 09:00-17:00", at(6, 10, 0), true, at(6, 17, 0), at(7, 9, 0)},
		{"Fri-Mon 09:00-17:00", at(1, 10, 0), false, never, at(4, 9, 0)},
		// Open all week: it never closes and no window opens.
		{"daily 00:00-24:00", at(2, 3, 4), true, never, never},
		{"daily 19:00-07:30", at(2, 3, 4), true, at(2, 7, 30), at(2, 19, 0)},
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Open(c.t); got != c.open {
			t.Errorf("%q.Open(%s) = %v, want %v", c.spec, c.t, got, c.open)
		}
		if got := s.Closes(c.t); !got.Equal(c.closes) {
			t.Errorf("%q.Closes(%s) = %s, want %s", c.spec, c.t, got, c.closes)
		}
		if got := s.Opens(c.t); !got.Equal(c.opens) {
			t.Errorf("%q.Opens(%s) = %s, want %s", c.spec, c.t, got, c.opens)
		}
	}
	var zero Schedule
	if zero.Open(monday) || !zero.Closes(monday).IsZero() || !zero.Opens(monday).IsZero() || zero.String() != "" {
		t.Errorf("the zero Schedule is open at times")
	}
}

// TestDST runs windows across New York's changes of clock in 2026: the
// clocks go from 02:00 EST to 03:00 EDT on 8 March and from 02:00 EDT back
// to 01:00 EST on 1 November.
func TestDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC).In(ny) }
	var never time.Time
	for _, c := range []struct {
		name          string
		spec          string
		t             time.Time
		open          bool
		closes, opens time.Time
	}{
		// 01:30 EST; 02:30 never comes, so the window ends at the jump,
		// 03:00 EDT.
		{"end in the gap", "Sun 01:00-02:30", utc(3, 8, 6, 30), true, utc(3, 8, 7, 0), utc(3, 15, 5, 0)},
		// 00:30 EST to 04:00 EDT: a window of four hours on the clock
		// lasts three.
		{"across the gap", "Sun 00:00-04:00", utc(3, 8, 5, 30), true, utc(3, 8, 8, 0), utc(3, 15, 4, 0)},
		// A window that would start in the gap opens at the jump.
		{"start in the gap", "Sun 02:30-04:00", utc(3, 8, 6, 30), false, never, utc(3, 8, 7, 0)},
		{"start in the gap, open", "Sun 02:30-04:00", utc(3, 8, 7, 15), true, utc(3, 8, 8, 0), utc(3, 15, 6, 30)},
		// 00:30 EDT: the window closes at the first 01:30 (EDT), opens
		// again when the clock goes back to 01:00 (EST), and closes at the
		// second 01:30.
		{"end in the repeat", "Sun 00:00-01:30", utc(11, 1, 4, 30), true, utc(11, 1, 5, 30), utc(11, 1, 6, 0)},
		{"end in the repeat, again", "Sun 00:00-01:30", utc(11, 1, 6, 0), true, utc(11, 1, 6, 30), utc(11, 8, 5, 0)},
		// Saturday 23:00 EDT to Sunday 03:00 EST: six hours, not five.
		{"across the repeat", "Sat 22:00-03:00", utc(11, 1, 3, 0), true, utc(11, 1, 8, 0), utc(11, 8, 3, 0)},
		// From Friday evening, EST, to Monday 00:00, EDT.
		{"weekend", "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00", utc(3, 7, 1, 0), true, utc(3, 9, 4, 0), utc(3, 9, 23, 0)},
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Open(c.t); got != c.open {
			t.Errorf("%s: Open(%s) = %v, want %v", c.name, c.t, got, c.open)
		}
		closes := s.Closes(c.t)
		if !closes.Equal(c.closes) {
			t.Errorf("%s: Closes(%s) = %s, want %s", c.name, c.t, closes, c.closes)
		}
		if !closes.IsZero() && closes.Location() != ny {
			t.Errorf("%s: Closes in %s, want %s", c.name, closes.Location(), ny)
		}
		if got := s.Opens(c.t); !got.Equal(c.opens) {
			t.Errorf("%s: Opens(%s) = %s, want %s", c.name, c.t, got, c.opens)
		}
	}
}

// window is one drawn window: its days (bit 0 Monday) and its times, in
// minutes since midnight, end ≤ start meaning past midnight.
type window struct {
	days       uint8
	start, end int
}

// openAt is the plain reading of windows: minute m of the week is open
// when some window's day, from its start, covers it.
func openAt(ws []window, m int) bool {
	for _, w := range ws {
		length := w.end - w.start
		if w.end <= w.start {
			length += dayMinutes
		}
		for d := range 7 {
			if w.days&(1<<d) != 0 && ((m-d*dayMinutes-w.start)%weekMinutes+weekMinutes)%weekMinutes < length {
				return true
			}
		}
	}
	return false
}

// drawWindow draws a window and writes it in one of the ways Parse reads.
func drawWindow(t *rapid.T) (window, string) {
	var w window
	for w.days == 0 {
		w.days = uint8(rapid.IntRange(0, allDays).Draw(t, "days"))
	}
	// Half-hour times most of the time, so that windows touch and overlap.
	clockOf := func(label string, max int) int {
		if rapid.Bool().Draw(t, label+"Coarse") {
			return 30 * rapid.IntRange(0, max/30).Draw(t, label)
		}
		return rapid.IntRange(0, max).Draw(t, label)
	}
	w.start = clockOf("start", dayMinutes-1)
	w.end = clockOf("end", dayMinutes)
	for w.end == w.start {
		w.end = rapid.IntRange(0, dayMinutes).Draw(t, "end")
	}
	return w, writeDays(t, w.days) + " " + writeClock(t, w.start) + "-" + writeClock(t, w.end)
}

func writeDays(t *rapid.T, days uint8) string {
	if days == allDays && rapid.Bool().Draw(t, "daily") {
		return rapid.SampledFrom([]string{"daily", "Daily", "DAILY"}).Draw(t, "dailyName")
	}
	name := func(d int) string {
		n := dayNames()[d%7]
		if rapid.Bool().Draw(t, "full") {
			n = fullDay(d % 7)
		}
		switch rapid.IntRange(0, 2).Draw(t, "case") {
		case 1:
			n = strings.ToLower(n)
		case 2:
			n = strings.ToUpper(n)
		}
		return n
	}
	var items []string
	for d := 0; d < 7; {
		if days&(1<<d) == 0 {
			d++
			continue
		}
		n := 1
		for d+n < 7 && days&(1<<(d+n)) != 0 {
			n++
		}
		if n > 1 && rapid.Bool().Draw(t, "asRange") {
			items = append(items, name(d)+"-"+name(d+n-1))
		} else {
			for i := range n {
				items = append(items, name(d+i))
			}
		}
		d += n
	}
	return strings.Join(items, ",")
}

func writeClock(t *rapid.T, m int) string {
	if m == dayMinutes {
		return "24:00"
	}
	if m < 600 && rapid.Bool().Draw(t, "shortHour") {
		return fmt.Sprintf("%d:%02d", m/60, m%60)
	}
	return clock(m)
}

// TestScheduleProperties draws windows, writes them as a spec, and checks
// the parsed Schedule against the plain reading of the windows minute by
// minute, in a zone without changes of clock: Open agrees, Closes is the
// first minute after t that is not open, Opens the first open minute after
// the closed one, and the canonical form reads back the same.
func TestScheduleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ws []window
		var parts []string
		for range rapid.IntRange(1, 4).Draw(t, "windows") {
			w, text := drawWindow(t)
			ws = append(ws, w)
			parts = append(parts, text)
		}
		spec := strings.Join(parts, rapid.SampledFrom([]string{";", "; ", " ; "}).Draw(t, "sep"))
		s, err := Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		// Seconds since monday, up to two weeks, so that instants fall
		// inside minutes too.
		sec := rapid.Int64Range(0, 2*weekMinutes*60-1).Draw(t, "t")
		tt := monday.Add(time.Duration(sec) * time.Second)
		if rapid.Bool().Draw(t, "nanos") {
			tt = tt.Add(time.Duration(rapid.Int64Range(1, 1e9-1).Draw(t, "ns")))
		}
		m := int(sec / 60)
		// boundary is the start of minute i after monday.
		boundary := func(i int) time.Time { return monday.Add(time.Duration(i) * time.Minute) }
		// first is the first minute after m, within two weeks, whose state
		// is open; -1 if none.
		first := func(m int, open bool) int {
			for i := m + 1; i <= m+2*weekMinutes; i++ {
				if openAt(ws, i%weekMinutes) == open {
					return i
				}
			}
			return -1
		}
		open := openAt(ws, m%weekMinutes)
		if got := s.Open(tt); got != open {
			t.Fatalf("%q: Open(%s) = %v, want %v", spec, tt, got, open)
		}
		var wantCloses, wantOpens time.Time
		from := m
		if open {
			if c := first(m, false); c >= 0 {
				wantCloses = boundary(c)
				from = c
			} else {
				from = -1
			}
		}
		if from >= 0 {
			if o := first(from, true); o >= 0 {
				wantOpens = boundary(o)
			}
		}
		closes, opens := s.Closes(tt), s.Opens(tt)
		if !closes.Equal(wantCloses) {
			t.Fatalf("%q: Closes(%s) = %s, want %s", spec, tt, closes, wantCloses)
		}
		if !opens.Equal(wantOpens) {
			t.Fatalf("%q: Opens(%s) = %s, want %s", spec, tt, opens, wantOpens)
		}
		for _, r := range []time.Time{closes, opens} {
			if !r.IsZero() && r.Location() != zone {
				t.Fatalf("%q: an answer in %s, not in t's location", spec, r.Location())
			}
		}
		canon := s.String()
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("%q: its canonical form %q does not parse: %v", spec, canon, err)
		}
		if back != s || back.String() != canon {
			t.Fatalf("%q: its canonical form %q reads back as %q", spec, canon, back)
		}
	})
}

// TestMain runs the property tests over a few thousand schedules unless
// told otherwise with -rapid.checks: the shapes that matter (a stretch of
// exactly a day from mid-day, windows touching across the week's end) are
// rare draws.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "3000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

package hours

import (
	"errors"
	"testing"
)

// FuzzParse feeds Parse any text: it must not panic, every error must wrap
// ErrSpec, and a schedule it accepts must write a canonical form that reads
// back to the same schedule, and writes itself the same again.
func FuzzParse(f *testing.F) {
	for _, spec := range []string{
		"Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00",
		"daily 00:00-24:00",
		"daily 19:00-07:30",
		"Fri-Mon 9:00-17:00",
		"monday,WEDNESDAY-fri 08:00-09:00",
		"Sun 22:00-02:00; Mon 01:00-03:00",
		"Mon 09:00-12:00;; Mon 12:00-14:00;",
		"Mon 10:00-09:59",
		"Mon 10:00-24:00; Tue 00:00-10:00",
		"Mon-Thu 19:00-07:30; Fri 19:00-24:00; Sat,Sun 00:00-24:00",
		"",
		";",
		"Mon-Fry 19:00-07:30",
		"Mon 09:00-09:00",
		"Mon 24:00-07:00",
		"Mon 10:00-24:30",
		"19:00-07:30",
		"Mon,,Tue 10:00-11:00",
		"Mon- 10:00-11:00",
		"Mon 10:00",
		"Mon 1:5-2:00",
		"Mon 10:00-11:00-12:00",
		"Mon\t10:00-11:00",
		"Mön 10:00-11:00",
	} {
		f.Add(spec)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("Parse(%q): %v does not wrap ErrSpec", spec, err)
			}
			if s != (Schedule{}) {
				t.Fatalf("Parse(%q) failed yet returned a schedule", spec)
			}
			return
		}
		canon := s.String()
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q): canonical form %q does not parse: %v", spec, canon, err)
		}
		if back != s {
			t.Fatalf("Parse(%q): canonical form %q reads back as another schedule, %q", spec, canon, back)
		}
		if again := back.String(); again != canon {
			t.Fatalf("Parse(%q): canonical form %q writes itself as %q", spec, canon, again)
		}
		// Every question has an answer, wherever in the week it is asked.
		for day := range 7 {
			tt := at(day, 12, 34)
			s.Open(tt)
			s.Closes(tt)
			s.Opens(tt)
		}
	})
}

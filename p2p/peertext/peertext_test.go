package peertext

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// osc52 writes "pwned" to the reader's clipboard in any terminal that
// allows it.
const osc52 = "\x1b]52;c;cHduZWQ=\a"

func TestUnsafe(t *testing.T) {
	unsafe := []rune{0, '\a', '\b', '\t', '\n', '\v', '\f', '\r', 0x1b, 0x1f, 0x7f, 0x80, 0x85, 0x9b, 0x9f,
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c}
	for _, r := range unsafe {
		if !Unsafe(r) {
			t.Errorf("Unsafe(%U) = false", r)
		}
	}
	safe := []rune{' ', '!', '~', '\\', '"', 0xa0, 0xe9, 0x2029, 0x200b, 0x200d, 0xfeff, 0xfffd, 0x1f600, 0x05d0, 0x202f, 0x2065, 0x206a}
	for _, r := range safe {
		if Unsafe(r) {
			t.Errorf("Unsafe(%U) = true", r)
		}
	}
}

func TestCleanCheckEscape(t *testing.T) {
	for _, c := range []struct {
		name, in      string
		clean, escape string
		err           string // what Check's error says, "" for none
	}{
		{"plain", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", ""},
		{"empty", "", "", "", ""},
		{"unicode", "Grafikkarte für naïve Ärzte 😀 עברית", "Grafikkarte für naïve Ärzte 😀 עברית", "Grafikkarte für naïve Ärzte 😀 עברית", ""},
		{"backslash", `C:\out\x1b`, `C:\out\x1b`, `C:\out\x1b`, ""},
		{"genuine replacement char", "a\ufffdb", "a\ufffdb", "a\ufffdb", ""},
		{"osc 52", "H100" + osc52, "H100]52;c;cHduZWQ=", `H100\x1b]52;c;cHduZWQ=\a`, `control character \x1b at byte 4`},
		{"csi", "\x1b[2J\x1b[HA100", "[2J[HA100", `\x1b[2J\x1b[HA100`, `control character \x1b at byte 0`},
		{"newline and tab", "exit status 1\nno space\tleft\r\n", "exit status 1 no space left  ", `exit status 1\nno space\tleft\r\n`, `control character \n at byte 13`},
		{"del", "a\x7fb", "ab", `a\x7fb`, `control character \x7f at byte 1`},
		{"c1 csi", "a\u009b31mb", "a31mb", `a\u009b31mb`, `control character \u009b at byte 1`},
		{"nel", "a\u0085b", "a b", `a\u0085b`, `control character \u0085 at byte 1`},
		{"bidi override", "txt.\u202egpj.exe", "txt.gpj.exe", `txt.\u202egpj.exe`, `bidi control \u202e at byte 4`},
		{"bidi isolate", "\u2066x\u2069", "x", `\u2066x\u2069`, `bidi control \u2066 at byte 0`},
		{"lone c1 byte", "a\x9b31m", "a\ufffd31m", `a\x9b31m`, `byte 0x9b at 1 is not UTF-8`},
		{"cut rune", "ab\xe2\x80", "ab\ufffd\ufffd", `ab\xe2\x80`, `byte 0xe2 at 2 is not UTF-8`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Clean(c.in); got != c.clean {
				t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.clean)
			}
			if got := Escape(c.in); got != c.escape {
				t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.escape)
			}
			err := Check(c.in)
			switch {
			case c.err == "" && err != nil:
				t.Errorf("Check(%q) = %v, want nil", c.in, err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("Check(%q) = %v, want an error saying %q", c.in, err, c.err)
			}
		})
	}
}

// Text already safe costs nothing: it is returned as it came, not copied.
func TestSafeTextNotCopied(t *testing.T) {
	s := strings.Repeat("NVIDIA H100 für alle ", 10)
	if n := testing.AllocsPerRun(100, func() { _ = Clean(s); _ = Escape(s); _ = Check(s) }); n != 0 {
		t.Fatalf("%v allocations for text with nothing to do", n)
	}
}

// peerString draws strings the way a hostile peer writes them: mostly
// printable, with controls, bidi runes, backslashes, quotes and stray
// bytes mixed in.
func peerString() *rapid.Generator[string] {
	piece := rapid.OneOf(
		rapid.StringMatching(`[ -~]{0,6}`),
		rapid.SampledFrom([]string{"\x1b", "\a", "\n", "\t", "\r", "\x00", "\x7f", "\u0085", "\u009b", "\u202e", "\u2066", "\u200f",
			"\ufffd", "\\", `"`, "é", "😀", "\x9b", "\xe2\x80", "\xff", osc52}),
		rapid.String(),
	)
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(piece, 0, 8).Draw(t, "pieces"), "")
	})
}

func TestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := peerString().Draw(t, "s")
		safe := utf8.ValidString(s) && !strings.ContainsFunc(s, Unsafe)
		if clean(s) != safe {
			t.Fatalf("clean(%q) = %v, want %v", s, clean(s), safe)
		}
		if (Check(s) == nil) != safe {
			t.Fatalf("Check(%q) = %v; safe: %v", s, Check(s), safe)
		}
		c := Clean(s)
		if Check(c) != nil || Clean(c) != c || len(c) > 3*len(s) {
			t.Fatalf("Clean(%q) = %q: not safe, not settled, or grown past 3 bytes a byte", s, c)
		}
		if safe != (c == s) {
			t.Fatalf("Clean(%q) = %q, though the text is safe: %v", s, c, safe)
		}
		e := Escape(s)
		if Check(e) != nil || safe != (e == s) {
			t.Fatalf("Escape(%q) = %q: unsafe, or changed safe text", s, e)
		}
		// Escapes are Go's: with no quote or backslash of its own, the
		// text reads back exactly from what Escape wrote.
		if !strings.ContainsAny(s, `"\`) {
			back, err := strconv.Unquote(`"` + e + `"`)
			if err != nil || back != s {
				t.Fatalf("Escape(%q) = %q reads back as %q (%v)", s, e, back, err)
			}
		}
		// Check names where the first unsafe rune or byte is.
		if err := Check(s); err != nil {
			i := strings.IndexFunc(s, Unsafe)
			if bad := firstInvalid(s); bad >= 0 && (i < 0 || bad < i) {
				i = bad
			}
			if !strings.Contains(err.Error(), " "+strconv.Itoa(i)) {
				t.Fatalf("Check(%q) = %v, want it to name byte %d", s, err, i)
			}
		}
	})
}

// firstInvalid is the index of the first byte of s that is not UTF-8, or -1.
func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd") {
			return i
		}
	}
	return -1
}

func BenchmarkClean(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"safe", "NVIDIA H100 80GB HBM3"},
		{"hostile", "NVIDIA H100" + osc52 + "\u202e"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_ = Clean(c.s)
			}
		})
	}
}

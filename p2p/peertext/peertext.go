package peertext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a reader's terminal as it is: a
// C0 control (U+0000–U+001F), DEL (U+007F), a C1 control (U+0080–U+009F),
// all three being Unicode's category Cc, or a bidi control (Unicode's
// Bidi_Control property: the embeddings and overrides U+202A–U+202E, the
// isolates U+2066–U+2069, and the marks U+061C, U+200E and U+200F).
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// clean reports whether s is valid UTF-8 free of unsafe runes: the text
// every function here leaves as it is.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		} else if c >= utf8.RuneSelf {
			// Only multi-byte runes can be C1, bidi controls or invalid
			// UTF-8: the slow path starts at the first.
			return !strings.ContainsFunc(s[i:], Unsafe) && utf8.ValidString(s[i:])
		}
	}
	return true
}

// Clean returns s with every unsafe rune removed, save those that separate
// words (tab, newline, vertical tab, form feed, carriage return, NEL), which
// become a space so that "exit status 1\nno space left" stays two phrases.
// Bytes that are not valid UTF-8 become U+FFFD: a lone byte 0x9b is CSI to a
// terminal that reads 8-bit controls. Text already clean is returned as is.
func Clean(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // an invalid byte comes as utf8.RuneError
		switch {
		case r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == '\u0085':
			b.WriteByte(' ')
		case !Unsafe(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check returns nil for valid UTF-8 free of unsafe runes, else an error that
// names the first offending rune or byte and where it is. Callers put the
// field's name in front.
func Check(s string) error {
	if clean(s) {
		return nil
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			return fmt.Errorf("byte %#x at %d is not UTF-8: text from a peer must be printable UTF-8", s[i], i)
		case Unsafe(r):
			return fmt.Errorf("%s at byte %d: text from a peer must be one printable line, free of control characters", describe(r), i)
		}
	}
	return nil // not reached: clean found something
}

// describe names an unsafe rune for an error: its escape and what it is.
func describe(r rune) string {
	if unicode.Is(unicode.Bidi_Control, r) {
		return "bidi control " + quoteRune(r)
	}
	return "control character " + quoteRune(r)
}

// Escape returns s with each unsafe rune written as Go writes it in a quoted
// string (\x1b, \n, \u009b, \u202e) and each byte that is not UTF-8 as \xNN,
// so that a reader sees that they are there and what they are, and a
// terminal obeys none of them. Everything else, backslashes included, is
// left as it is: text with nothing unsafe in it prints unchanged.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Unsafe(r):
			b.WriteString(quoteRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// quoteRune is r as strconv writes it inside quotes: \x1b, \n, \u202e.
func quoteRune(r rune) string {
	q := strconv.QuoteRuneToASCII(r)
	return q[1 : len(q)-1]
}

package market

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a declaration's labels.
const (
	MaxLabels          = 32
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 253
)

// validateLabels checks labels: a few, each key a short name (letters,
// digits, '.', '_', '-', '/', starting with a letter or digit), each value
// printable text. Every peer's view holds a declaration's labels and e31
// status prints them, so a value may hold no control character (an ESC
// would start a sequence the reader's terminal obeys) and no bidi control
// (which would reorder the line it is printed in): unsafeText.
func validateLabels(labels map[string]string, ps *problems) {
	if len(labels) > MaxLabels {
		ps.add("labels", "must hold at most %d labels, not %d", MaxLabels, len(labels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // problems in a fixed order
	for _, k := range keys {
		f := labelField(k)
		if err := checkLabelKey(k); err != "" {
			ps.add(f, "%s", err)
			continue
		}
		v := labels[k]
		switch {
		case len(v) > MaxLabelValueBytes:
			ps.add(f, "must be at most %d bytes, not %d", MaxLabelValueBytes, len(v))
		case !utf8.ValidString(v):
			ps.add(f, "must be valid UTF-8")
		default:
			for _, r := range v {
				if unsafeText(r) {
					ps.add(f, "must not contain control characters or bidi controls (found %q)", r)
					break
				}
			}
		}
	}
}

// unsafeText reports whether r must not appear in text from a peer that
// a person reads: a control character (C0, DEL, C1) or a bidi control. It
// is p2p/peertext.Unsafe, restated because market imports no package of
// the module; a test holds the two to the same runes.
func unsafeText(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// checkLabelKey says what is wrong with a label's key, or "".
func checkLabelKey(k string) string {
	switch {
	case k == "":
		return "a label's key must not be empty"
	case len(k) > MaxLabelKeyBytes:
		return fmt.Sprintf("the key must be at most %d bytes", MaxLabelKeyBytes)
	case !isAlnum(k[0]):
		return "the key must start with a letter or digit"
	}
	for _, r := range k {
		if r >= utf8.RuneSelf || !isAlnum(byte(r)) && !strings.ContainsRune("._-/", r) {
			return fmt.Sprintf("the key may hold only letters, digits, '.', '_', '-' and '/', not %q", r)
		}
	}
	return ""
}

func labelField(k string) string {
	if checkLabelKey(k) == "" {
		return "labels." + k
	}
	return fmt.Sprintf("labels[%q]", k)
}

// ParseLabel splits a K=V label as given on a command line, checking both.
func ParseLabel(kv string) (key, value string, err error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q: want KEY=VALUE, e.g. team=vision", kv)
	}
	var ps problems
	validateLabels(map[string]string{k: v}, &ps)
	if err := ps.err(); err != nil {
		return "", "", fmt.Errorf("label %q: %w", kv, err)
	}
	return k, v, nil
}

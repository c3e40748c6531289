package market

import (
	"strings"
	"testing"
	"unicode"

	"github.com/e31network/e31/p2p/peertext"
)

// A job's name and labels travel to every peer in its declaration and are
// printed by e31 list and e31 status: a declaration whose name or label
// would write the reader's clipboard (OSC 52), move the cursor or reorder
// the line is refused, and the problem names the field and the character.
func TestNameAndLabelsRefuseTerminalControls(t *testing.T) {
	base := "work: {command: [true]}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\n"
	for _, c := range []struct{ decl, want string }{
		{`name: "train\x1b]52;c;cHduZWQ=\a"`, `name: must be printable (found '\x1b')`},
		{`name: "train\u202egnp.exe"`, `name: must be printable (found '\u202e')`},
		{`name: "train\u0085"`, `name: must be printable (found '\u0085')`},
		{"name: x\nlabels: {team: \"vision\\x1b]52;c;cHduZWQ=\\a\"}", `labels.team: must not contain control characters or bidi controls (found '\x1b')`},
		{"name: x\nlabels: {team: \"a\\tb\"}", `labels.team: must not contain control characters or bidi controls (found '\t')`},
		{"name: x\nlabels: {team: \"vision\\u2066\"}", `labels.team: must not contain control characters or bidi controls (found '\u2066')`},
		{"name: x\nlabels: {team: \"\\u009b2J\"}", `labels.team: must not contain control characters or bidi controls (found '\u009b')`},
	} {
		_, err := DecodeDeclaration([]byte(c.decl + "\n" + base))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.decl, err, c.want)
		}
	}
	// Printable text of any script, with its joiners and spaces, is kept.
	d, err := DecodeDeclaration([]byte("name: naïve-résumé\nlabels: {team: \"視覚 👩\u200d💻 עברית\", note: \"a b\"}\n" + base))
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels["team"] != "視覚 👩\u200d💻 עברית" {
		t.Fatalf("labels %q", d.Labels)
	}
}

// market states the rule on text from peers itself, importing no other
// package of the module: it must be peertext's rule, rune for rune.
func TestUnsafeTextIsPeertexts(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unsafeText(r) != peertext.Unsafe(r) {
			t.Fatalf("%U: market says unsafe %v, peertext %v", r, unsafeText(r), peertext.Unsafe(r))
		}
	}
}

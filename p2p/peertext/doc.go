// Package peertext is what this node does with text a peer wrote that a
// person will read: a GPU's model in an offer, a receipt's reason, a job's
// name or labels, a relay's reason. Such text reaches a terminal (e31 nodes,
// e31 status) or a page, and a stranger can put in it what a terminal obeys
// rather than shows: ESC ] 52 writes the reader's clipboard, CSI sequences
// move the cursor and rewrite what is on the screen, and the Unicode bidi
// controls reorder a line so that it reads other than it is.
//
// Unsafe names those runes: the C0 controls (tab and newline included, since
// every such field is one line), DEL, the C1 controls, and the bidi controls
// (overrides, embeddings, isolates and marks). Each place takes one of three
// stances on them:
//
//   - Clean strips them where a decoder takes display-only text that no
//     signature covers (an offer's GPU model), so that what a node stores
//     and shows is already safe.
//   - Check refuses text that carries them where the text is signed and so
//     cannot be altered (a receipt's reason, signed by both parties), and
//     where a rule can simply forbid them (a job's labels).
//   - Escape writes them visibly (\x1b, \u202e) where text is printed, so
//     that text stored before these rules, or by a peer that ignores them,
//     still prints safely.
//
// The package imports nothing but the standard library's text packages, so
// that market, ledger and node/wire can all use it.
package peertext

package content

import "fmt"

// Limits caps the size of a tree that Import reads or Export writes. Both
// take trees that someone else made (a job's output folder, a DAG from
// another peer), and either can be built to cost far more than it looks:
// a million empty files, a sparse file of 1 TiB, a DAG of a few MB that
// links one zero block a million times, folders nested thousands deep.
//
// The zero value caps only the nesting, at DepthCeiling.
type Limits struct {
	// MaxBytes caps the file content: for Import the apparent size of
	// the regular files (fi.Size(), so a sparse file counts at its full
	// size, as it would when exported), for Export the bytes it would
	// write. 0 or less means no cap.
	MaxBytes int64
	// MaxEntries caps the files, folders and symlinks of the tree; the
	// root folder itself is not one. On Import the entries left out by
	// SkipUnsupported count too: a million FIFOs cost a walk as much as a
	// million files. 0 or less means no cap.
	MaxEntries int
	// MaxDepth caps how deep folders nest: the root folder is depth 0, a
	// folder in it depth 1. 0, or more than DepthCeiling, means
	// DepthCeiling.
	MaxDepth int
}

// DepthCeiling is the deepest folder nesting Import and Export accept,
// whatever Limits says. Both walk folders by recursion, one call per
// level, and a DAG can nest without end, while a goroutine whose stack
// outgrows Go's maximum kills the whole process with no chance to recover.
// Measured here, an export of folders 1024 deep needs under 512 KiB of
// stack but takes 4.5 s: os.Root resolves each path a component at a
// time, so the cost grows with the square of the depth (4096 deep took a
// minute). A tree that deep is no real job's anyway: on Linux a path of
// more than 2048 folders passes PATH_MAX even with one-letter names.
const DepthCeiling = 1024

// maxFileLevels is the deepest a file DAG may be, in links from its root
// to a leaf. Export reads a file by recursion, one call per level. Boxo's
// balanced layout with our 1024 links and 1 MiB chunks is 2 levels deep for
// 1 TiB and 3 for 1 PiB; with its defaults (174 links, 256 KiB) 3 for
// 1 TiB; a trickle DAG of 1 TiB is about 8 deep, and even a binary tree
// needs only 64 levels for 2^64 leaves. Anything deeper is not a file
// layout but an attack on the stack.
const maxFileLevels = 64

// maxShardBits is how many hash bits a HAMT-sharded directory can spend
// on its levels: its names are hashed with 64-bit murmur3, and each level
// takes log2(fanout) bits, so a deeper shard could never be looked up and
// exists only to make a walk long.
const maxShardBits = 64

// LimitError is the error of a tree over one of its Limits. It wraps
// ErrTooLarge, so callers that only need to know the tree was refused
// for its size branch on that; those that name the setting to change use
// errors.As and read Limit.
type LimitError struct {
	// Limit is the cap that was hit: "bytes", "entries" or "depth".
	Limit string
	// Cap is the cap's value.
	Cap int64
	// Got is what had been counted when the walk passed the cap. Walks
	// stop there, so the whole tree may hold more.
	Got int64
}

func (e *LimitError) Error() string {
	var what string
	switch e.Limit {
	case "bytes":
		got, limit := formatBytes(e.Got), formatBytes(e.Cap)
		if sameRounded(e.Got, e.Cap) {
			// Rounding would hide the difference: say it exactly.
			got, limit = fmt.Sprintf("%d bytes", e.Got), fmt.Sprintf("%d bytes", e.Cap)
		}
		what = fmt.Sprintf("%s of files, over the cap of %s", got, limit)
	case "entries":
		what = fmt.Sprintf("%d entries, over the cap of %d entries", e.Got, e.Cap)
	case "depth":
		what = fmt.Sprintf("folders nested deeper than %d", e.Cap)
	default:
		what = fmt.Sprintf("%d %s, over the cap of %d", e.Got, e.Limit, e.Cap)
	}
	return ErrTooLarge.Error() + ": " + what
}

func (e *LimitError) Unwrap() error { return ErrTooLarge }

// formatBytes writes n as a person reads it: "512 bytes", "10 GiB",
// "1.5 TiB".
func formatBytes(n int64) string {
	div, unit := byteUnit(n)
	switch {
	case div == 1:
		return fmt.Sprintf("%d bytes", n)
	case n%div == 0:
		return fmt.Sprintf("%d %s", n/div, unit)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(div), unit)
}

// byteUnit is the largest binary unit not above n: its size and name.
func byteUnit(n int64) (int64, string) {
	div, unit := int64(1), "bytes"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if n/div < 1024 {
			break
		}
		div, unit = div*1024, u
	}
	return div, unit
}

// sameRounded reports whether a and b read alike once rounded to a tenth
// of their unit, as formatBytes may round them.
func sameRounded(a, b int64) bool {
	da, ua := byteUnit(a)
	db, ub := byteUnit(b)
	return ua == ub && fmt.Sprintf("%.1f", float64(a)/float64(da)) == fmt.Sprintf("%.1f", float64(b)/float64(db))
}

// depthCap is the folder nesting l allows.
func (l Limits) depthCap() int {
	if l.MaxDepth <= 0 || l.MaxDepth > DepthCeiling {
		return DepthCeiling
	}
	return l.MaxDepth
}

// tally counts a tree against Limits as a walk goes. Counts saturate
// instead of wrapping: a DAG that reuses one subtree can describe more
// than 2^63 bytes in a few blocks.
type tally struct {
	lim     Limits
	entries int64
	bytes   int64
}

func (t *tally) addEntries(n int64) error {
	t.entries = addSat(t.entries, n)
	if t.lim.MaxEntries > 0 && t.entries > int64(t.lim.MaxEntries) {
		return &LimitError{Limit: "entries", Cap: int64(t.lim.MaxEntries), Got: t.entries}
	}
	return nil
}

func (t *tally) addBytes(n int64) error {
	t.bytes = addSat(t.bytes, n)
	if t.lim.MaxBytes > 0 && t.bytes > t.lim.MaxBytes {
		return &LimitError{Limit: "bytes", Cap: t.lim.MaxBytes, Got: t.bytes}
	}
	return nil
}

// wouldExceedBytes reports, as an error, whether n more bytes would pass
// the cap, without counting them: for a size that is only claimed.
func (t *tally) wouldExceedBytes(n int64) error {
	if got := addSat(t.bytes, n); t.lim.MaxBytes > 0 && got > t.lim.MaxBytes {
		return &LimitError{Limit: "bytes", Cap: t.lim.MaxBytes, Got: got}
	}
	return nil
}

// checkDepth fails if a folder at depth d is deeper than the cap.
func (t *tally) checkDepth(d int) error {
	if c := t.lim.depthCap(); d > c {
		return &LimitError{Limit: "depth", Cap: int64(c), Got: int64(d)}
	}
	return nil
}

// addSat adds two non-negative counts, saturating at the largest int64.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

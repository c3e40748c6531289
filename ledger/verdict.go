package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/e31network/e31/p2p/peertext"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// VerdictReplica is one replica's result as the submitter compared it.
type VerdictReplica struct {
	Lease    string  `json:"lease"` // the replica's lease ID
	Provider peer.ID `json:"provider"`
	Output   string  `json:"output"`   // the output CID its final receipt names ("" if none)
	Compared string  `json:"compared"` // the value compared: Output itself when Compare is "output"
}

// Verdict is a submitter's signed word on replicas of one job that it
// compared: which value each replica's run gave and which, if any, more
// than half of them share. A lease whose replica lost is not owed under
// the default policy (Policy.Bill), and a third party checks a verdict
// against the replicas' final receipts (VerifyExport).
type Verdict struct {
	Job       string  // the job or array task (ARRAY/N) whose runs were compared
	Submitter peer.ID // who compared them, and signs
	// Compare is how: CompareOutput, "paths:" and the paths compared,
	// comma-separated, or CompareCommand (the user's comparator job).
	Compare  string
	Replicas []VerdictReplica // MinReplicas to MaxReplicas, distinct leases and providers
	// Winner is the Compared value more than half of Replicas share; ""
	// if none does.
	Winner string
	At     time.Time // ms precision, like receipts
	Sig    []byte
}

// Ways a verdict compares replicas.
const (
	// CompareOutput compares the output folder's CID: out/ inside the
	// DAG the final receipt names, without the logs beside it, which may
	// carry times. A holder of that DAG checks it; the ledger cannot.
	CompareOutput = "output"
	// ComparePaths, followed by comma-separated paths, compares only
	// those files of each output.
	ComparePaths = "paths:"
	// CompareCommand trusts the exit code of the user's comparator job.
	CompareCommand = "command"
)

// Bounds of a verdict.
const (
	MinReplicas = 2
	MaxReplicas = 5
	// MaxVerdictSize caps the JSON of one verdict.
	MaxVerdictSize = 16 << 10
	// maxCompareLen bounds Compare, maxComparedLen each Compared value.
	maxCompareLen  = 2048
	maxComparedLen = 256
)

// ErrInvalidVerdict: a verdict breaks a structural rule (see Validate) or
// its Winner is not the strict majority of its replicas.
var ErrInvalidVerdict = errors.New("invalid verdict")

// verdictDomain separates verdict signatures from any other message the
// submitter's key signs.
const verdictDomain = "e31-verdict/1\n"

// NewVerdict returns the unsigned verdict on reps, its Winner the Compared
// value more than half of them share ("" if none does).
func NewVerdict(job string, submitter peer.ID, compare string, reps []VerdictReplica, at time.Time) Verdict {
	v := Verdict{Job: job, Submitter: submitter, Compare: compare, Replicas: append([]VerdictReplica(nil), reps...), At: msTime(at)}
	v.Winner = majority(v.Replicas)
	return v
}

// majority is the non-empty Compared value that more than half of reps
// share, or "". An empty Compared (nothing to compare) counts against
// every value.
func majority(reps []VerdictReplica) string {
	counts := map[string]int{}
	for _, r := range reps {
		if r.Compared != "" {
			counts[r.Compared]++
		}
	}
	for c, n := range counts {
		if 2*n > len(reps) {
			return c // at most one value can hold more than half
		}
	}
	return ""
}

// Losers are the replicas whose Compared value is not the Winner; none
// when there is no Winner.
func (v *Verdict) Losers() []VerdictReplica {
	if v.Winner == "" {
		return nil
	}
	var out []VerdictReplica
	for _, r := range v.Replicas {
		if r.Compared != v.Winner {
			out = append(out, r)
		}
	}
	return out
}

// Lost reports whether the replica run under lease lost.
func (v *Verdict) Lost(lease string) bool {
	for _, r := range v.Losers() {
		if r.Lease == lease {
			return true
		}
	}
	return false
}

// Replica returns the replica run under lease.
func (v *Verdict) Replica(lease string) (VerdictReplica, bool) {
	for _, r := range v.Replicas {
		if r.Lease == lease {
			return r, true
		}
	}
	return VerdictReplica{}, false
}

// SigningBytes is the canonical encoding the submitter signs: every field
// but Sig, each string length-prefixed, after verdictDomain.
func (v *Verdict) SigningBytes() []byte {
	b := make([]byte, 0, 256+len(v.Compare)+len(v.Replicas)*256)
	b = append(b, verdictDomain...)
	b = appendString(b, v.Job)
	b = appendString(b, string(v.Submitter))
	b = appendString(b, v.Compare)
	b = binary.AppendUvarint(b, uint64(len(v.Replicas)))
	for _, r := range v.Replicas {
		b = appendString(b, r.Lease)
		b = appendString(b, string(r.Provider))
		b = appendString(b, r.Output)
		b = appendString(b, r.Compared)
	}
	b = appendString(b, v.Winner)
	return binary.BigEndian.AppendUint64(b, uint64(v.At.UnixMilli()))
}

// digest identifies the verdict: the SHA-256 of what is signed.
func (v *Verdict) digest() [32]byte { return sha256.Sum256(v.SigningBytes()) }

// Sign signs the verdict as its submitter; k must be the key behind
// Submitter (ErrWrongKey otherwise). It refuses a verdict Validate refuses.
func (v *Verdict) Sign(k crypto.PrivKey) error {
	if !v.Submitter.MatchesPrivateKey(k) {
		return fmt.Errorf("sign verdict on %s as %s: %w", v.Job, v.Submitter, ErrWrongKey)
	}
	v.At = msTime(v.At)
	if err := v.Validate(); err != nil {
		return fmt.Errorf("sign verdict: %w", err)
	}
	sig, _, err := signWith(k, v.SigningBytes())
	if err != nil {
		return fmt.Errorf("sign verdict on %s: %w", v.Job, err)
	}
	v.Sig = sig
	return nil
}

// Verify checks the structure (Validate), that Winner is the strict
// majority of the replicas, and the submitter's signature, with the key
// its peer ID embeds.
func (v *Verdict) Verify() error {
	if err := v.Validate(); err != nil {
		return err
	}
	pk, err := publicKey(v.Submitter)
	if err != nil {
		return fmt.Errorf("verdict on %s: submitter: %w", v.Job, err)
	}
	if err := checkSig(pk, v.SigningBytes(), v.Sig); err != nil {
		return fmt.Errorf("verdict on %s: submitter %s: %w", v.Job, v.Submitter, err)
	}
	return nil
}

// Validate checks the rules every verdict keeps, but its signature: IDs
// and CIDs well formed, MinReplicas to MaxReplicas replicas of distinct
// leases and providers, for Compare "output" each Compared its Output,
// and Winner the strict majority.
func (v *Verdict) Validate() error {
	if err := v.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidVerdict, err)
	}
	return nil
}

func (v *Verdict) validate() error {
	if err := checkID("job", v.Job); err != nil {
		return err
	}
	if err := checkPeer("submitter", v.Submitter); err != nil {
		return err
	}
	if err := checkCompare(v.Compare); err != nil {
		return fmt.Errorf("verdict on %s: %w", v.Job, err)
	}
	if n := len(v.Replicas); n < MinReplicas || n > MaxReplicas {
		return fmt.Errorf("verdict on %s: %d replicas, want %d to %d", v.Job, n, MinReplicas, MaxReplicas)
	}
	leases, providers := map[string]bool{}, map[peer.ID]bool{}
	for i, r := range v.Replicas {
		if err := r.validate(v.Compare); err != nil {
			return fmt.Errorf("verdict on %s: replica %d (lease %q): %w", v.Job, i, r.Lease, err)
		}
		if leases[r.Lease] {
			return fmt.Errorf("verdict on %s: lease %s named twice", v.Job, r.Lease)
		}
		if providers[r.Provider] {
			return fmt.Errorf("verdict on %s: provider %s named twice", v.Job, r.Provider)
		}
		leases[r.Lease], providers[r.Provider] = true, true
	}
	if ms := v.At.UnixMilli(); v.At.IsZero() || ms < 0 || ms > maxUnixMilli {
		return fmt.Errorf("verdict on %s: at: %v is outside 1970 to 9999", v.Job, v.At)
	}
	if len(v.Sig) > maxSigLen {
		return fmt.Errorf("verdict on %s: signature longer than %d bytes", v.Job, maxSigLen)
	}
	if want := majority(v.Replicas); v.Winner != want {
		return fmt.Errorf("verdict on %s: winner %q is not the strict majority of the replicas (%q)", v.Job, v.Winner, want)
	}
	return nil
}

func (r *VerdictReplica) validate(compare string) error {
	if err := checkID("lease", r.Lease); err != nil {
		return err
	}
	if err := checkPeer("provider", r.Provider); err != nil {
		return err
	}
	if err := checkCID("output", r.Output); err != nil {
		return err
	}
	if len(r.Compared) > maxComparedLen || !printableASCII(r.Compared) {
		return fmt.Errorf("compared: want printable ASCII of at most %d bytes", maxComparedLen)
	}
	return nil
}

// checkCompare accepts the ways a verdict compares: "output", "command",
// or "paths:" and at least one path, with no character a terminal would
// obey rather than show (peertext.Check): a verdict's text is signed, so
// it is refused, never cleaned.
func checkCompare(c string) error {
	switch {
	case c == CompareOutput || c == CompareCommand:
		return nil
	case strings.HasPrefix(c, ComparePaths):
		paths := strings.TrimPrefix(c, ComparePaths)
		if paths == "" || len(c) > maxCompareLen || !utf8.ValidString(paths) {
			return fmt.Errorf("compare: want %q and 1 to %d bytes of UTF-8 paths", ComparePaths, maxCompareLen)
		}
		if err := peertext.Check(paths); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		for p := range strings.SplitSeq(paths, ",") {
			if p == "" {
				return fmt.Errorf("compare: %q names an empty path", c)
			}
		}
		return nil
	}
	return fmt.Errorf("compare: %q, want %q, %q or %q and paths", c, CompareOutput, CompareCommand, ComparePaths)
}

// printableASCII reports whether s holds only bytes from space to tilde:
// no control character a terminal would obey.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

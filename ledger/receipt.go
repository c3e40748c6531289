package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Phase is a phase of a lease, as named in receipts.
type Phase string

// Phases of a lease, as named in receipts.
const (
	PhaseStaging Phase = "staging"
	PhaseRun     Phase = "run"
	PhaseOutput  Phase = "output"
)

// Valid reports whether p is one of the named phases. The empty phase is
// not: whether a receipt may carry it depends on the receipt (Validate).
func (p Phase) Valid() bool {
	switch p {
	case PhaseStaging, PhaseRun, PhaseOutput:
		return true
	}
	return false
}

// Outcome is how a lease ended, as a final receipt records it.
type Outcome string

// Outcomes a final receipt can record.
const (
	OutcomeCompleted    Outcome = "completed"
	OutcomeFailed       Outcome = "failed"
	OutcomeLimit        Outcome = "limit"
	OutcomeWithdrawn    Outcome = "withdrawn"
	OutcomeProviderLost Outcome = "provider-lost"
	OutcomeOutputLost   Outcome = "output-lost"
	// OutcomePreempted: the provider took its GPUs back (it drained):
	// the run was stopped after a last checkpoint, and the job goes on
	// elsewhere from it.
	OutcomePreempted Outcome = "preempted"
)

// outcomes lists every outcome a final receipt can record, in a fixed order.
func outcomes() []Outcome {
	return []Outcome{OutcomeCompleted, OutcomeFailed, OutcomeLimit, OutcomeWithdrawn, OutcomeProviderLost, OutcomeOutputLost, OutcomePreempted}
}

// Valid reports whether o is one of the named outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeCompleted, OutcomeFailed, OutcomeLimit, OutcomeWithdrawn, OutcomeProviderLost, OutcomeOutputLost, OutcomePreempted:
		return true
	}
	return false
}

// Signer names the one party that signed a one-sided final record.
type Signer string

// Signers of a one-sided final record: the one party that signed it.
const (
	SignerProvider  Signer = "provider"
	SignerSubmitter Signer = "submitter"
)

// Valid reports whether s names one of the two parties. The empty Signer,
// which marks a receipt both signed, is not.
func (s Signer) Valid() bool { return s == SignerProvider || s == SignerSubmitter }

// Attribution names the party a final receipt holds responsible for how
// the lease ended.
type Attribution string

// Parties a final receipt can hold responsible for how the lease ended.
const (
	AttributionJob       Attribution = "job"
	AttributionProvider  Attribution = "provider"
	AttributionSubmitter Attribution = "submitter"
	AttributionNetwork   Attribution = "network"
)

// Valid reports whether a is one of the named parties.
func (a Attribution) Valid() bool {
	switch a {
	case AttributionJob, AttributionProvider, AttributionSubmitter, AttributionNetwork:
		return true
	}
	return false
}

// Ending is how a lease ended, as its final receipt records it. Whoever
// decides an ending (a provider's run, a submitter that gave its provider
// up) passes it whole, so that its outcome, attribution and reason cannot
// trade places on the way.
type Ending struct {
	Outcome     Outcome
	Attribution Attribution
	// Reason says why, in words; "" for a run that completed.
	Reason string
	// ExitCode is the job's exit status, nil where its process never ran
	// or its status is not known.
	ExitCode *int
}

// Sentinel errors callers branch on.
var (
	// ErrUnsigned: a signature the operation needs is absent.
	ErrUnsigned = errors.New("receipt not signed")
	// ErrBadSignature: a signature is present but does not verify against the
	// signer's peer ID, or that peer ID carries no usable public key.
	ErrBadSignature = errors.New("receipt signature does not verify")
	// ErrWrongKey: the private key offered for signing is not the one behind
	// the peer ID named in the role being signed for.
	ErrWrongKey = errors.New("key does not match the receipt's peer ID")
	// ErrInvalidReceipt: the receipt breaks a structural rule (see Validate).
	ErrInvalidReceipt = errors.New("invalid receipt")
)

// signingDomain separates receipt signatures from any other message the same
// peer key signs (offers, leases, pubsub envelopes), so a signature made for
// one can never be replayed as the other.
const signingDomain = "e31-receipt/1\n"

// recordDomain separates one-sided final records from receipts, so that a
// signature one party made on its own can never pass for half of a receipt
// both signed, nor the other way round.
const recordDomain = "e31-record/1\n"

// Phases holds the seconds a lease spent in each phase.
type Phases struct {
	Staging float64 `json:"staging"`
	Run     float64 `json:"run"`
	Output  float64 `json:"output"`
}

// Receipt is one signed statement of compute held under a lease. The provider
// signs it, the submitter countersigns the same bytes, and both keep it.
// Interim receipts (Seq 0, 1, …) are cumulative: each covers HeldFrom to
// HeldUntil and links to its predecessor through Prev. The final receipt adds
// the outcome and the phase durations.
//
// Times are meaningful to the millisecond: SigningBytes and the JSON form both
// drop anything finer, so a receipt survives a round trip through JSON with
// its signatures intact.
type Receipt struct {
	Lease     string
	Job       string
	Provider  peer.ID
	Submitter peer.ID
	// GPUs is the number of GPUs held under the lease; with Held it gives the
	// GPU-seconds owed, so it is signed like every other field.
	GPUs      int
	Seq       uint64
	Final     bool
	HeldFrom  time.Time
	HeldUntil time.Time
	// Phase is the phase the lease is in (interim) or ended in (final).
	Phase Phase
	// Prev is Digest() of the receipt with Seq-1 in the same lease, "" for Seq 0.
	Prev string

	// Set on the final receipt only.
	Outcome     Outcome
	Attribution Attribution
	ExitCode    *int
	Reason      string
	Phases      Phases
	Output      string  // CID of the output
	Checkpoint  string  // CID of the last checkpoint
	OutputWait  float64 // seconds the output waited for the submitter to fetch it

	// GPUModel is the model of the leased GPUs, "" if not known. It is
	// signed, so that usage split per model rests on both parties' word.
	GPUModel string
	// GPUsSeen, on a final receipt, are the GPUs the provider's sandbox
	// found before the run, as the driver named them: proof, signed by
	// the provider, of what the job ran on. Nil where the run never
	// started or the provider predates the field.
	GPUsSeen []GPUSeen
	// Relay, on a final receipt, is the relay the lease's data (staging,
	// output, checkpoints) moved through for want of a direct connection
	// between the parties; "" where it moved directly (relay.go).
	Relay peer.ID
	// CheckpointAt, on a final receipt that names a Checkpoint, is when
	// the provider took that checkpoint: the run's work up to then is
	// kept, which the policy may charge for where the rest is not
	// (a preempted lease). Zero where not known.
	CheckpointAt time.Time
	// CPUs, MemoryBytes and DiskBytes are what the lease held beside its
	// GPUs: the CPUs and memory of its terms and the disk its job declared
	// (request.disk). They are signed, so that what a job without GPUs
	// held rests on both parties' word (held.go). Zero where the provider
	// predates them.
	CPUs        int
	MemoryBytes uint64
	DiskBytes   uint64

	// Signer is "" on a receipt both parties sign. On a one-sided final
	// record, stored where the other party vanished before it could
	// countersign, it names the one party that signed: SignerProvider or
	// SignerSubmitter. Only that party's signature is set.
	Signer Signer
	// Evidence is the lease both parties signed, which a one-sided record
	// must carry so that its claim rests on more than one side's word. Nil
	// on two-sided receipts.
	Evidence *LeaseEvidence

	ProviderSig  []byte
	SubmitterSig []byte

	// made notes the signatures this process made on r itself, so that
	// Ledger.Append need not check them again (see signedHere).
	made *signedHere
}

// Ending is how the lease ended, on a final receipt; zero on an interim one.
func (r *Receipt) Ending() Ending {
	return Ending{Outcome: r.Outcome, Attribution: r.Attribution, Reason: r.Reason, ExitCode: r.ExitCode}
}

// OneSided reports whether r is a one-sided final record.
func (r *Receipt) OneSided() bool { return r.Signer != "" }

// signerID is the peer behind r.Signer.
func (r *Receipt) signerID() peer.ID {
	if r.Signer == SignerSubmitter {
		return r.Submitter
	}
	return r.Provider
}

// Held is the compute time the receipt covers.
func (r *Receipt) Held() time.Duration {
	return msTime(r.HeldUntil).Sub(msTime(r.HeldFrom))
}

// GPUSeconds is Held times the number of GPUs held.
func (r *Receipt) GPUSeconds() float64 {
	return r.Held().Seconds() * float64(r.GPUs)
}

// CPUSeconds is Held times the number of CPUs held; 0 where the receipt
// does not say (held.go).
func (r *Receipt) CPUSeconds() float64 {
	return r.Held().Seconds() * float64(r.CPUs)
}

// SigningBytes is the canonical encoding both parties sign: every field but
// the two signatures, in a fixed order, each string length-prefixed so that no
// two different receipts encode alike. It is independent of JSON so that
// field order, spacing or escaping on the wire cannot change what was signed.
//
// GPUModel is appended only when set, so receipts signed before it existed
// keep their bytes; the encoding before it is self-delimiting, so the tail
// cannot be confused with another field. GPUsSeen likewise, after GPUModel
// (then appended even when empty, so that the two tails never read
// alike). Relay, when set, comes after GPUModel and the count of
// GPUsSeen, both then written even when empty; CheckpointAt, when set,
// comes after all three, written even when empty. CPUs, MemoryBytes and
// DiskBytes, when any is set, come last, after all four, then written even
// when empty (held.go). A one-sided record is signed under recordDomain
// and also covers GPUModel, Signer and the whole lease evidence, then
// GPUsSeen when set (and Relay, CheckpointAt and the resources held, on
// the same terms).
func (r *Receipt) SigningBytes() []byte {
	n := 256 + len(r.Lease) + len(r.Job) + len(r.Reason) + len(r.Output) + len(r.Checkpoint) + len(r.GPUModel)
	if r.OneSided() {
		b := make([]byte, 0, n+512)
		b = r.appendBody(append(b, recordDomain...))
		b = appendString(b, r.GPUModel)
		b = appendString(b, string(r.Signer))
		var ev LeaseEvidence
		if r.Evidence != nil {
			ev = *r.Evidence
		}
		b = appendString(b, string(ev.Terms))
		b = appendString(b, string(ev.ProviderSig))
		b = appendString(b, string(ev.SubmitterSig))
		return appendTail(b, r)
	}
	b := r.appendBody(append(make([]byte, 0, n), signingDomain...))
	if r.GPUModel != "" || len(r.GPUsSeen) > 0 || r.Relay != "" || !r.CheckpointAt.IsZero() || r.heldSet() {
		b = appendString(b, r.GPUModel)
	}
	return appendTail(b, r)
}

// appendTail appends what follows GPUModel: the GPUs seen and the relay
// (appendSeenAndRelay), then CheckpointAt when set, after which the relay
// is written even when empty, so that no receipt without it encodes like
// one with.
func appendTail(b []byte, r *Receipt) []byte {
	if r.heldSet() {
		return appendHeldTail(b, r)
	}
	if r.CheckpointAt.IsZero() {
		return appendSeenAndRelay(b, r.GPUsSeen, r.Relay)
	}
	b = binary.AppendUvarint(b, uint64(len(r.GPUsSeen)))
	for _, g := range r.GPUsSeen {
		b = appendString(b, g.UUID)
		b = appendString(b, g.Model)
	}
	b = appendString(b, string(r.Relay))
	return binary.BigEndian.AppendUint64(b, uint64(r.CheckpointAt.UnixMilli()))
}

// appendBody encodes the fields receipts and one-sided records share.
func (r *Receipt) appendBody(b []byte) []byte {
	b = appendString(b, r.Lease)
	b = appendString(b, r.Job)
	b = appendString(b, string(r.Provider))
	b = appendString(b, string(r.Submitter))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.GPUs)))
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = appendBool(b, r.Final)
	b = binary.BigEndian.AppendUint64(b, uint64(r.HeldFrom.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(r.HeldUntil.UnixMilli()))
	b = appendString(b, string(r.Phase))
	b = appendString(b, r.Prev)
	b = appendString(b, string(r.Outcome))
	b = appendString(b, string(r.Attribution))
	b = appendBool(b, r.ExitCode != nil)
	if r.ExitCode != nil {
		b = binary.BigEndian.AppendUint64(b, uint64(int64(*r.ExitCode)))
	}
	b = appendString(b, r.Reason)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Phases.Staging))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Phases.Run))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Phases.Output))
	b = appendString(b, r.Output)
	b = appendString(b, r.Checkpoint)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.OutputWait))
	return b
}

// Digest is the hex SHA-256 of SigningBytes: what the next receipt of the
// lease puts in Prev.
func (r *Receipt) Digest() string {
	sum := sha256.Sum256(r.SigningBytes())
	return hex.EncodeToString(sum[:])
}

// SignProvider signs the receipt as its provider. sk must be the key behind
// r.Provider, so that a node cannot sign for a role it does not hold.
func (r *Receipt) SignProvider(sk crypto.PrivKey) error {
	if r.OneSided() {
		return fmt.Errorf("sign as provider: %w: a one-sided record is signed with SignOneSided", ErrInvalidReceipt)
	}
	if !r.Provider.MatchesPrivateKey(sk) {
		return fmt.Errorf("sign as provider %s: %w", r.Provider, ErrWrongKey)
	}
	sig, err := r.sign(sk, SignerProvider)
	if err != nil {
		return fmt.Errorf("sign as provider: %w", err)
	}
	r.ProviderSig = sig
	return nil
}

// Countersign signs the receipt as its submitter, after the provider. It
// refuses a receipt the provider has not signed, since a countersignature
// only means something over a provider's claim. It does not check the
// provider's signature itself: Verify does, and Ledger.Append refuses any
// receipt that fails Verify, so checking here would only double the cost.
func (r *Receipt) Countersign(sk crypto.PrivKey) error {
	if r.OneSided() {
		return fmt.Errorf("countersign: %w: a one-sided record has one signer", ErrInvalidReceipt)
	}
	if len(r.ProviderSig) == 0 {
		return fmt.Errorf("countersign: provider signature: %w", ErrUnsigned)
	}
	if !r.Submitter.MatchesPrivateKey(sk) {
		return fmt.Errorf("countersign as submitter %s: %w", r.Submitter, ErrWrongKey)
	}
	sig, err := r.sign(sk, SignerSubmitter)
	if err != nil {
		return fmt.Errorf("countersign: %w", err)
	}
	r.SubmitterSig = sig
	return nil
}

// SignOneSided signs a one-sided final record as the party r.Signer names;
// sk must be that party's key. The record must carry the lease evidence,
// which is checked first: a survivor's record is only worth storing with
// the lease both parties signed.
func (r *Receipt) SignOneSided(sk crypto.PrivKey) error {
	if !r.OneSided() {
		return fmt.Errorf("sign one-sided record: %w: signer not set", ErrInvalidReceipt)
	}
	if id := r.signerID(); !id.MatchesPrivateKey(sk) {
		return fmt.Errorf("sign one-sided record as %s %s: %w", r.Signer, id, ErrWrongKey)
	}
	if err := r.checkEvidence(); err != nil {
		return fmt.Errorf("sign one-sided record: %w", err)
	}
	sig, err := r.sign(sk, "")
	if err != nil {
		return fmt.Errorf("sign one-sided record: %w", err)
	}
	r.ProviderSig, r.SubmitterSig = nil, nil
	if r.Signer == SignerSubmitter {
		r.SubmitterSig = sig
	} else {
		r.ProviderSig = sig
	}
	return nil
}

// sign returns sk's signature over r's signing bytes. as names the role
// it is made in, to be noted in r.made when it is known valid; "" notes
// nothing.
func (r *Receipt) sign(sk crypto.PrivKey, as Signer) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	msg := r.SigningBytes()
	sig, valid, err := signWith(sk, msg)
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	if valid && as != "" {
		r.made = r.made.with(as, msg, sig)
	}
	return sig, nil
}

// Verify checks both signatures using nothing but the two peer IDs, which
// embed their public keys (Ed25519 and secp256k1 identities do), so any third
// party can check a receipt without contacting either peer. On a one-sided
// record it checks the signer's signature, that the other is absent, and the
// lease evidence: both parties' signatures over the lease terms, and that
// the terms name this record's lease, job, parties and GPU count.
func (r *Receipt) Verify() error {
	if r.OneSided() {
		return r.verifyOneSided()
	}
	pp, err := publicKey(r.Provider)
	if err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	sp, err := publicKey(r.Submitter)
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	return r.verifyWith(r.SigningBytes(), pp, sp)
}

func (r *Receipt) verifyOneSided() error {
	pk, err := publicKey(r.signerID())
	if err != nil {
		return fmt.Errorf("%s: %w", r.Signer, err)
	}
	return r.verifyWith(r.SigningBytes(), pk, pk)
}

// checkEvidence checks the lease evidence of a one-sided record: both
// signatures, that the lease is the record's, and that the record's held
// time is within what the lease allows (CheckHeld).
func (r *Receipt) checkEvidence() error {
	if r.Evidence == nil {
		return fmt.Errorf("%w: one-sided record without lease evidence", ErrInvalidReceipt)
	}
	t, err := r.Evidence.verify()
	if err != nil {
		return fmt.Errorf("lease evidence: %w", err)
	}
	return CheckHeld(r, t)
}

// verifyWith checks the signatures over msg. On a one-sided record the
// signer's key must be passed for its role (the other is not used) and the
// lease evidence is checked too.
func (r *Receipt) verifyWith(msg []byte, provider, submitter *pubKey) error {
	if r.OneSided() {
		sig, other, pk := r.ProviderSig, r.SubmitterSig, provider
		if r.Signer == SignerSubmitter {
			sig, other, pk = r.SubmitterSig, r.ProviderSig, submitter
		}
		if len(other) != 0 {
			return fmt.Errorf("%w: a one-sided record carries the other party's signature", ErrBadSignature)
		}
		if err := checkSig(pk, msg, sig); err != nil {
			return fmt.Errorf("%s %s: %w", r.Signer, r.signerID(), err)
		}
		return r.checkEvidence()
	}
	if err := checkSig(provider, msg, r.ProviderSig); err != nil {
		return fmt.Errorf("provider %s: %w", r.Provider, err)
	}
	if err := checkSig(submitter, msg, r.SubmitterSig); err != nil {
		return fmt.Errorf("submitter %s: %w", r.Submitter, err)
	}
	return nil
}

// verifyForStore is verifyWith for Ledger.Append, which skips the
// signatures r.made shows were made, valid, by this process (a node
// countersigns and stores at once). Every other signature is checked.
func (r *Receipt) verifyForStore(msg []byte, provider, submitter *pubKey) error {
	if r.OneSided() || r.made == nil {
		return r.verifyWith(msg, provider, submitter)
	}
	if !r.made.has(SignerProvider, msg, r.ProviderSig) {
		if err := checkSig(provider, msg, r.ProviderSig); err != nil {
			return fmt.Errorf("provider %s: %w", r.Provider, err)
		}
	}
	if !r.made.has(SignerSubmitter, msg, r.SubmitterSig) {
		if err := checkSig(submitter, msg, r.SubmitterSig); err != nil {
			return fmt.Errorf("submitter %s: %w", r.Submitter, err)
		}
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// msTime drops what a receipt cannot carry: anything below a millisecond, the
// monotonic reading and the zone.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

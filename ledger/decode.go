package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/e31network/e31/p2p/peertext"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MaxReceiptSize caps the JSON of one receipt. A real receipt is well under
// 2 KiB; the cap bounds what a peer can make us parse and store.
const MaxReceiptSize = 16 << 10

// MaxRecordSize caps the JSON of a one-sided record, which carries the
// lease terms besides what a receipt holds.
const MaxRecordSize = MaxReceiptSize + 2*maxTermsLen

// Bounds on single fields, generous for real values, tight enough that a
// receipt cannot grow past MaxReceiptSize through any one of them.
const (
	maxIDLen     = 256  // lease and job IDs
	maxCIDLen    = 128  // output and checkpoint CIDs
	maxReasonLen = 2048 // free text
	maxSigLen    = 128  // Ed25519 is 64 bytes, secp256k1 DER at most 72
	maxGPUs      = 1024
	maxModelLen  = 128 // GPU model names ("NVIDIA H100 80GB HBM3")
	// slackSeconds absorbs clock rounding between the meter and the phase
	// timers when phases are compared with the held time.
	slackSeconds = 1.0
)

// timeLayout is RFC 3339 with exactly three fractional digits, the precision
// SigningBytes keeps.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// maxUnixMilli is the end of year 9999, the last instant RFC 3339 can write.
const maxUnixMilli = 253402300799999

// receiptJSON is the wire and storage form, with the field names that
// `e31 receipts --json` prints. Every field is always written so that scripts
// see one schema for interim and final receipts.
type receiptJSON struct {
	Lease       string  `json:"lease"`
	Job         string  `json:"job"`
	Provider    string  `json:"provider"`
	Submitter   string  `json:"submitter"`
	GPUs        int     `json:"gpus"`
	Seq         uint64  `json:"seq"`
	Final       bool    `json:"final"`
	HeldFrom    string  `json:"held_from"`
	HeldUntil   string  `json:"held_until"`
	Phase       string  `json:"phase"`
	Prev        string  `json:"prev"`
	Outcome     string  `json:"outcome"`
	Attribution string  `json:"attribution"`
	ExitCode    *int    `json:"exit_code"`
	Reason      string  `json:"reason"`
	Phases      Phases  `json:"phases"`
	Output      string  `json:"output"`
	Checkpoint  string  `json:"checkpoint"`
	OutputWait  float64 `json:"output_wait"`
	// Fields added after the first receipts were stored are left out when
	// empty, so that those receipts keep their stored bytes.
	GPUModel     string        `json:"gpu_model,omitempty"`
	GPUsSeen     []GPUSeen     `json:"gpus_seen,omitempty"`
	Relay        string        `json:"relay,omitempty"`
	CheckpointAt string        `json:"checkpoint_at,omitempty"`
	CPUs         int           `json:"cpus,omitempty"`
	MemoryBytes  uint64        `json:"memory_bytes,omitempty"`
	DiskBytes    uint64        `json:"disk_bytes,omitempty"`
	Signer       string        `json:"signer,omitempty"`
	Evidence     *evidenceJSON `json:"evidence,omitempty"`
	ProviderSig  []byte        `json:"provider_sig"`
	SubmitterSig []byte        `json:"submitter_sig"`
}

// evidenceJSON carries the lease terms as a JSON string rather than an
// embedded object: encoding/json would re-indent or re-escape an object,
// and the signatures cover the terms byte for byte.
type evidenceJSON struct {
	Terms        string `json:"terms"`
	ProviderSig  []byte `json:"provider_sig"`
	SubmitterSig []byte `json:"submitter_sig"`
}

// MarshalJSON writes the receipt with times in UTC to the millisecond and the
// signatures in base64.
func (r Receipt) MarshalJSON() ([]byte, error) {
	w := r.wire(nil)
	return json.Marshal(&w)
}

func (r *Receipt) wire(pc *peerText) receiptJSON {
	var ev *evidenceJSON
	if r.Evidence != nil {
		ev = &evidenceJSON{Terms: string(r.Evidence.Terms), ProviderSig: r.Evidence.ProviderSig, SubmitterSig: r.Evidence.SubmitterSig}
	}
	return receiptJSON{
		GPUModel:     r.GPUModel,
		GPUsSeen:     r.GPUsSeen,
		Relay:        relayText(r.Relay),
		CheckpointAt: checkpointAtText(r.CheckpointAt),
		CPUs:         r.CPUs,
		MemoryBytes:  r.MemoryBytes,
		DiskBytes:    r.DiskBytes,
		Signer:       string(r.Signer),
		Evidence:     ev,
		Lease:        r.Lease,
		Job:          r.Job,
		Provider:     pc.encode(r.Provider),
		Submitter:    pc.encode(r.Submitter),
		GPUs:         r.GPUs,
		Seq:          r.Seq,
		Final:        r.Final,
		HeldFrom:     msTime(r.HeldFrom).Format(timeLayout),
		HeldUntil:    msTime(r.HeldUntil).Format(timeLayout),
		Phase:        string(r.Phase),
		Prev:         r.Prev,
		Outcome:      string(r.Outcome),
		Attribution:  string(r.Attribution),
		ExitCode:     r.ExitCode,
		Reason:       r.Reason,
		Phases:       r.Phases,
		Output:       r.Output,
		Checkpoint:   r.Checkpoint,
		OutputWait:   r.OutputWait,
		ProviderSig:  r.ProviderSig,
		SubmitterSig: r.SubmitterSig,
	}
}

// UnmarshalJSON decodes as strictly as DecodeReceipt, but for the rule on
// text from a peer (checkText): it reads receipts a node already holds (a
// ledger through the API, a record on disk), which may predate the rule
// and must still be read, and shown escaped.
func (r *Receipt) UnmarshalJSON(data []byte) error {
	v, err := decodeReceipt(data)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// DecodeReceipt decodes a receipt that arrived from a peer and refuses
// anything that is not a well-formed receipt: input over MaxReceiptSize,
// unknown fields, trailing data, anything Validate refuses, and text that
// a terminal would obey rather than show (checkText). It does not check
// signatures; call Verify for that.
func DecodeReceipt(data []byte) (Receipt, error) {
	r, err := decodeReceipt(data)
	if err != nil {
		return Receipt{}, err
	}
	if err := r.checkText(); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	return r, nil
}

// checkText refuses a receipt whose free text (its reason, the GPU models
// and UUIDs it names) holds a control or bidi character (peertext.Unsafe):
// an ESC ] 52 sequence in a reason would write the clipboard of whoever
// lists it. The text is signed by both parties, so it cannot be cleaned,
// only refused, and no honest node writes one (a provider cleans its
// reasons). Validate does not apply it, so that receipts stored before the
// rule still verify: only DecodeReceipt, at the edge where receipts come
// in from peers, does.
func (r *Receipt) checkText() error {
	if err := peertext.Check(r.Reason); err != nil {
		return fmt.Errorf("reason: %w", err)
	}
	if err := peertext.Check(r.GPUModel); err != nil {
		return fmt.Errorf("gpu_model: %w", err)
	}
	for i, g := range r.GPUsSeen {
		if err := peertext.Check(g.UUID); err != nil {
			return fmt.Errorf("gpus_seen[%d].uuid: %w", i, err)
		}
		if err := peertext.Check(g.Model); err != nil {
			return fmt.Errorf("gpus_seen[%d].model: %w", i, err)
		}
	}
	return nil
}

// decodeReceipt is DecodeReceipt without the rule on text.
func decodeReceipt(data []byte) (Receipt, error) {
	if len(data) > MaxRecordSize {
		return Receipt{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidReceipt, len(data), MaxRecordSize)
	}
	if err := checkKeys(data, receiptField); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w receiptJSON
	if err := dec.Decode(&w); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Receipt{}, fmt.Errorf("%w: data after the receipt object", ErrInvalidReceipt)
	}
	r, err := w.receipt(nil)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	if err := r.Validate(); err != nil {
		return Receipt{}, err
	}
	if !r.OneSided() && len(data) > MaxReceiptSize {
		return Receipt{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidReceipt, len(data), MaxReceiptSize)
	}
	return r, nil
}

// fieldSet says whether name is a field of an object and, for a nested
// object, gives that object's fields.
type fieldSet func(name string) (nested fieldSet, ok bool)

func receiptField(name string) (fieldSet, bool) {
	switch name {
	case "phases":
		return phasesField, true
	case "evidence":
		return evidenceField, true
	case "gpus_seen":
		return gpuSeenField, true
	case "gpu_model", "signer", "relay", "checkpoint_at", "cpus", "memory_bytes", "disk_bytes",
		"lease", "job", "provider", "submitter", "gpus", "seq", "final", "held_from", "held_until",
		"phase", "prev", "outcome", "attribution", "exit_code", "reason", "output", "checkpoint",
		"output_wait", "provider_sig", "submitter_sig":
		return nil, true
	}
	return nil, false
}

func gpuSeenField(name string) (fieldSet, bool) {
	switch name {
	case "uuid", "model":
		return nil, true
	}
	return nil, false
}

func evidenceField(name string) (fieldSet, bool) {
	switch name {
	case "terms", "provider_sig", "submitter_sig":
		return nil, true
	}
	return nil, false
}

func phasesField(name string) (fieldSet, bool) {
	switch name {
	case "staging", "run", "output":
		return nil, true
	}
	return nil, false
}

// checkKeys refuses what encoding/json forgives in an object: a field name
// in another letter case, and the same field twice. Neither could change
// what was signed, but a receipt has exactly one spelling.
func checkKeys(data []byte, fields fieldSet) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		nested, known := fields(name)
		if !known {
			return fmt.Errorf("unknown field %q", name)
		}
		if seen[name] {
			return fmt.Errorf("field %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if nested != nil && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			// An array of objects: each element has the same fields.
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			for i, e := range elems {
				if err := checkKeys(e, nested); err != nil {
					return fmt.Errorf("%s[%d]: %w", name, i, err)
				}
			}
		} else if nested != nil && !bytes.Equal(raw, []byte("null")) {
			if err := checkKeys(raw, nested); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

func (w *receiptJSON) receipt(pc *peerText) (Receipt, error) {
	r := Receipt{
		GPUModel:     w.GPUModel,
		GPUsSeen:     w.GPUsSeen,
		Signer:       Signer(w.Signer),
		Lease:        w.Lease,
		Job:          w.Job,
		GPUs:         w.GPUs,
		Seq:          w.Seq,
		Final:        w.Final,
		Phase:        Phase(w.Phase),
		Prev:         w.Prev,
		Outcome:      Outcome(w.Outcome),
		Attribution:  Attribution(w.Attribution),
		ExitCode:     w.ExitCode,
		Reason:       w.Reason,
		Phases:       w.Phases,
		Output:       w.Output,
		Checkpoint:   w.Checkpoint,
		OutputWait:   w.OutputWait,
		CPUs:         w.CPUs,
		MemoryBytes:  w.MemoryBytes,
		DiskBytes:    w.DiskBytes,
		ProviderSig:  w.ProviderSig,
		SubmitterSig: w.SubmitterSig,
	}
	if w.Evidence != nil {
		r.Evidence = &LeaseEvidence{Terms: json.RawMessage(w.Evidence.Terms), ProviderSig: w.Evidence.ProviderSig, SubmitterSig: w.Evidence.SubmitterSig}
	}
	var err error
	if r.Provider, err = pc.decode(w.Provider); err != nil {
		return Receipt{}, fmt.Errorf("provider: %w", err)
	}
	if r.Submitter, err = pc.decode(w.Submitter); err != nil {
		return Receipt{}, fmt.Errorf("submitter: %w", err)
	}
	if w.Relay != "" {
		if r.Relay, err = peer.Decode(w.Relay); err != nil {
			return Receipt{}, fmt.Errorf("relay: %w", err)
		}
	}
	if w.CheckpointAt != "" {
		if r.CheckpointAt, err = decodeTime(w.CheckpointAt); err != nil {
			return Receipt{}, fmt.Errorf("checkpoint_at: %w", err)
		}
	}
	if r.HeldFrom, err = decodeTime(w.HeldFrom); err != nil {
		return Receipt{}, fmt.Errorf("held_from: %w", err)
	}
	if r.HeldUntil, err = decodeTime(w.HeldUntil); err != nil {
		return Receipt{}, fmt.Errorf("held_until: %w", err)
	}
	return r, nil
}

// peerText converts peer IDs to and from their base58 text, remembering
// the results when not nil. Base58 is quadratic and a ledger names few
// peers, so a walk over many entries converts each peer once.
type peerText struct {
	ids   map[string]peer.ID
	texts map[peer.ID]string
}

// maxPeerText bounds the memory a walk spends on remembered peers.
const maxPeerText = 4096

func newPeerText() *peerText {
	return &peerText{ids: map[string]peer.ID{}, texts: map[peer.ID]string{}}
}

func (pc *peerText) decode(s string) (peer.ID, error) {
	if s == "" {
		return "", errors.New("missing peer ID")
	}
	if pc != nil {
		if id, ok := pc.ids[s]; ok {
			return id, nil
		}
	}
	id, err := peer.Decode(s)
	if err != nil {
		return "", fmt.Errorf("peer ID %q: %w", s, err)
	}
	if pc != nil && len(pc.ids) < maxPeerText {
		pc.ids[s] = id
	}
	return id, nil
}

func (pc *peerText) encode(id peer.ID) string {
	if pc == nil {
		return id.String()
	}
	if s, ok := pc.texts[id]; ok {
		return s
	}
	s := id.String()
	if len(pc.texts) < maxPeerText {
		pc.texts[id] = s
	}
	return s
}

func decodeTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("missing time")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	// Digits below the millisecond are not signed; accepting them would let
	// two different texts carry one signature.
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		return time.Time{}, fmt.Errorf("%q is finer than a millisecond", s)
	}
	return t.UTC(), nil
}

// Validate checks the structural rules every stored or exchanged receipt
// keeps; it does not check signatures. The rules make the JSON form round-trip
// to the same SigningBytes (valid UTF-8, finite numbers, times RFC 3339 can
// write) and refuse what no honest meter produces: time running backwards,
// final-only fields on an interim receipt, phases longer than the lease.
func (r *Receipt) Validate() error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	return nil
}

func (r *Receipt) validate() error {
	if err := checkID("lease", r.Lease); err != nil {
		return err
	}
	if err := checkID("job", r.Job); err != nil {
		return err
	}
	if err := checkPeer("provider", r.Provider); err != nil {
		return err
	}
	if err := checkPeer("submitter", r.Submitter); err != nil {
		return err
	}
	if r.GPUs < 0 || r.GPUs > maxGPUs {
		return fmt.Errorf("gpus: %d, want 0 to %d", r.GPUs, maxGPUs)
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"held_from", r.HeldFrom}, {"held_until", r.HeldUntil}} {
		if ms := f.t.UnixMilli(); f.t.IsZero() || ms < 0 || ms > maxUnixMilli {
			return fmt.Errorf("%s: %v is outside 1970 to 9999", f.name, f.t)
		}
	}
	if r.Held() < 0 {
		return fmt.Errorf("held_until %v is before held_from %v", msTime(r.HeldUntil), msTime(r.HeldFrom))
	}
	if r.Seq == 0 && r.Prev != "" {
		return errors.New("prev: must be empty on seq 0")
	}
	if r.Seq > 0 && !isDigest(r.Prev) {
		return fmt.Errorf("prev: %q is not a lowercase hex SHA-256", r.Prev)
	}
	if err := r.validatePhase(); err != nil {
		return err
	}
	if err := checkCID("checkpoint", r.Checkpoint); err != nil {
		return err
	}
	if r.Final {
		if err := r.validateFinal(); err != nil {
			return err
		}
	} else if err := r.validateInterim(); err != nil {
		return err
	}
	if len(r.ProviderSig) > maxSigLen || len(r.SubmitterSig) > maxSigLen {
		return fmt.Errorf("signature longer than %d bytes", maxSigLen)
	}
	if len(r.GPUModel) > maxModelLen || !utf8.ValidString(r.GPUModel) || strings.ContainsFunc(r.GPUModel, unicode.IsControl) {
		return fmt.Errorf("gpu_model: want printable UTF-8 of at most %d bytes", maxModelLen)
	}
	if err := validateGPUsSeen(r); err != nil {
		return err
	}
	if err := validateRelay(r); err != nil {
		return err
	}
	if err := validateCheckpointAt(r); err != nil {
		return err
	}
	if err := validateHeld(r); err != nil {
		return err
	}
	return r.validateSigner()
}

func (r *Receipt) validateSigner() error {
	if r.Signer == "" {
		if r.Evidence != nil {
			return errors.New("evidence: only a one-sided record carries lease evidence")
		}
		return nil
	}
	if !r.Signer.Valid() {
		return fmt.Errorf("signer: %q, want provider or submitter", r.Signer)
	}
	if !r.Final {
		return errors.New("signer: only a final record can be one-sided")
	}
	if r.Evidence == nil {
		return errors.New("evidence: missing on a one-sided record")
	}
	if err := r.Evidence.validate(); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	return nil
}

func (r *Receipt) validatePhase() error {
	if r.Phase.Valid() {
		return nil
	}
	if r.Phase == "" {
		if r.Final {
			// A lease withdrawn before staging began ended in no phase.
			return nil
		}
		return errors.New("phase: missing on an interim receipt")
	}
	return fmt.Errorf("phase: %q, want staging, run or output", r.Phase)
}

func (r *Receipt) validateFinal() error {
	if !r.Outcome.Valid() {
		return fmt.Errorf("outcome: %q, want completed, failed, limit, withdrawn, provider-lost or output-lost", r.Outcome)
	}
	if !r.Attribution.Valid() {
		return fmt.Errorf("attribution: %q, want job, provider, submitter or network", r.Attribution)
	}
	if r.ExitCode != nil && (*r.ExitCode < math.MinInt32 || *r.ExitCode > math.MaxInt32) {
		return fmt.Errorf("exit_code: %d is out of range", *r.ExitCode)
	}
	if len(r.Reason) > maxReasonLen || !utf8.ValidString(r.Reason) {
		return fmt.Errorf("reason: want valid UTF-8 of at most %d bytes", maxReasonLen)
	}
	if err := checkCID("output", r.Output); err != nil {
		return err
	}
	held := r.Held().Seconds() + slackSeconds
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"phases.staging", r.Phases.Staging},
		{"phases.run", r.Phases.Run},
		{"phases.output", r.Phases.Output},
	} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > held {
			return fmt.Errorf("%s: %v, want 0 to the %v s held", f.name, f.v, r.Held().Seconds())
		}
	}
	// Output may wait for an absent submitter long after the GPUs were
	// released, so its wait is bounded by the retention window, not by the
	// time held.
	if math.IsNaN(r.OutputWait) || r.OutputWait < 0 || r.OutputWait > maxOutputWait {
		return fmt.Errorf("output_wait: %v, want 0 to %v s", r.OutputWait, float64(maxOutputWait))
	}
	if sum := r.Phases.Staging + r.Phases.Run + r.Phases.Output; sum > held {
		return fmt.Errorf("phases add up to %v s, more than the %v s held", sum, r.Held().Seconds())
	}
	return nil
}

// maxOutputWait bounds output_wait: a year, in seconds.
const maxOutputWait = 366 * 24 * 3600

func (r *Receipt) validateInterim() error {
	if r.Outcome != "" || r.Attribution != "" || r.ExitCode != nil || r.Reason != "" ||
		r.Phases != (Phases{}) || r.Output != "" || r.OutputWait != 0 {
		return errors.New("outcome, attribution, exit_code, reason, phases, output and output_wait belong on the final receipt only")
	}
	return nil
}

// checkID accepts printable ASCII without spaces: IDs are hashes or names
// minted by the market, and anything else in them is a sign of a forged or
// corrupt receipt.
func checkID(field, s string) error {
	if s == "" || len(s) > maxIDLen {
		return fmt.Errorf("%s: want 1 to %d characters, got %d", field, maxIDLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("%s: byte %#x at %d is not printable ASCII", field, s[i], i)
		}
	}
	return nil
}

// checkCID accepts the alphabet of the multibase encodings CIDs are written
// in; it does not parse the CID, which is content/'s business.
func checkCID(field, s string) error {
	if len(s) > maxCIDLen {
		return fmt.Errorf("%s: longer than %d characters", field, maxCIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%s: %q is not a CID", field, s)
		}
	}
	return nil
}

func checkPeer(field string, id peer.ID) error {
	if id == "" {
		return fmt.Errorf("%s: missing peer ID", field)
	}
	if _, err := peer.IDFromBytes([]byte(id)); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	// The JSON form carries the ID as base58 text, which peer.Decode reads
	// back only for identity multihashes (text "1…") and SHA-256 ones ("Qm…").
	// Any other ID could be signed but never shown or stored.
	if id[0] != 0x00 && (len(id) != 34 || id[0] != 0x12 || id[1] != 0x20) {
		return fmt.Errorf("%s: peer ID is neither an identity nor a SHA-256 multihash", field)
	}
	return nil
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

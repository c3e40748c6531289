package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// verdictJSON is a verdict's wire, storage and export form.
type verdictJSON struct {
	Job       string               `json:"job"`
	Submitter string               `json:"submitter"`
	Compare   string               `json:"compare"`
	Replicas  []verdictReplicaJSON `json:"replicas"`
	Winner    string               `json:"winner"`
	At        string               `json:"at"`
	Sig       []byte               `json:"sig"`
}

// verdictReplicaJSON is VerdictReplica with its peer ID as text, read by
// the strict decoder rather than peer.ID's own.
type verdictReplicaJSON struct {
	Lease    string `json:"lease"`
	Provider string `json:"provider"`
	Output   string `json:"output"`
	Compared string `json:"compared"`
}

func verdictField(name string) (fieldSet, bool) {
	switch name {
	case "replicas":
		return verdictReplicaField, true
	case "job", "submitter", "compare", "winner", "at", "sig":
		return nil, true
	}
	return nil, false
}

func verdictReplicaField(name string) (fieldSet, bool) {
	switch name {
	case "lease", "provider", "output", "compared":
		return nil, true
	}
	return nil, false
}

// MarshalVerdict encodes v as JSON, every field written.
func MarshalVerdict(v Verdict) ([]byte, error) {
	w := verdictJSON{Job: v.Job, Submitter: v.Submitter.String(), Compare: v.Compare, Winner: v.Winner,
		At: msTime(v.At).Format(timeLayout), Sig: v.Sig, Replicas: make([]verdictReplicaJSON, len(v.Replicas))}
	for i, r := range v.Replicas {
		w.Replicas[i] = verdictReplicaJSON{Lease: r.Lease, Provider: r.Provider.String(), Output: r.Output, Compared: r.Compared}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("marshal verdict on %s: %w", v.Job, err)
	}
	return b, nil
}

// UnmarshalVerdict decodes a verdict as strictly as DecodeReceipt decodes
// a receipt: input over MaxVerdictSize, unknown or repeated fields, field
// names in another case, trailing data, anything Validate refuses
// (including a Winner that is not the strict majority, and text a terminal
// would obey) are refused with ErrInvalidVerdict. It does not check the
// signature; call Verify for that.
func UnmarshalVerdict(data []byte) (Verdict, error) {
	if len(data) > MaxVerdictSize {
		return Verdict{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidVerdict, len(data), MaxVerdictSize)
	}
	if err := checkKeys(data, verdictField); err != nil {
		return Verdict{}, fmt.Errorf("%w: %w", ErrInvalidVerdict, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w verdictJSON
	if err := dec.Decode(&w); err != nil {
		return Verdict{}, fmt.Errorf("%w: %w", ErrInvalidVerdict, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Verdict{}, fmt.Errorf("%w: data after the verdict object", ErrInvalidVerdict)
	}
	v, err := w.verdict()
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: %w", ErrInvalidVerdict, err)
	}
	if err := v.Validate(); err != nil {
		return Verdict{}, err
	}
	return v, nil
}

func (w *verdictJSON) verdict() (Verdict, error) {
	v := Verdict{Job: w.Job, Compare: w.Compare, Winner: w.Winner, Sig: w.Sig}
	var err error
	if v.Submitter, err = (*peerText)(nil).decode(w.Submitter); err != nil {
		return Verdict{}, fmt.Errorf("submitter: %w", err)
	}
	if v.At, err = decodeTime(w.At); err != nil {
		return Verdict{}, fmt.Errorf("at: %w", err)
	}
	if len(w.Replicas) > MaxReplicas {
		return Verdict{}, fmt.Errorf("%d replicas, at most %d", len(w.Replicas), MaxReplicas)
	}
	for i, r := range w.Replicas {
		p, err := (*peerText)(nil).decode(r.Provider)
		if err != nil {
			return Verdict{}, fmt.Errorf("replicas[%d].provider: %w", i, err)
		}
		v.Replicas = append(v.Replicas, VerdictReplica{Lease: r.Lease, Provider: p, Output: r.Output, Compared: r.Compared})
	}
	return v, nil
}

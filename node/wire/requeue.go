package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
)

// KindRequeue re-announces a submitter's queued jobs: the original signed
// declarations, wrapped. A declaration's own envelope is too old to gossip
// again after a few minutes (validators refuse stale messages), yet a peer
// that joined or restarted since must still learn of the job.
const KindRequeue = "requeue"

// RequeueBody carries signed declaration envelopes, each its own evidence.
type RequeueBody struct {
	Declarations [][]byte `json:"declarations"`
	// Avoid names, for some of the declarations carried, the providers
	// that failed the job (market.Job.Avoid). The requeue's signer must be
	// the job's submitter, which the declarations prove.
	Avoid []AvoidEntry `json:"avoid,omitempty"`
}

// AvoidEntry is the avoid list of one job.
type AvoidEntry struct {
	Job       string   `json:"job"`
	Providers []string `json:"providers"` // peer IDs, each once
	// Until is, for each provider in turn, when its avoid lifts (Unix
	// ms): from then on every peer's Match may place the job there again.
	// An avoid is a penalty, never a sentence: a provider that failed a
	// job once, or that could not be reached at the time, may serve it
	// later. Empty (an older version's): each lifts MaxAvoidFor after
	// the announcement.
	Until []int64 `json:"until,omitempty"`
}

// MaxAvoidFor bounds how long past its announcement an avoid may last.
const MaxAvoidFor = 24 * time.Hour

// UntilOf is when the avoid of Providers[k] lifts, for an entry announced
// at signed.
func (a AvoidEntry) UntilOf(k int, signed time.Time) time.Time {
	if k < len(a.Until) {
		return time.UnixMilli(a.Until[k])
	}
	return signed.Add(MaxAvoidFor)
}

// MaxAvoid bounds the providers one job may avoid: enough for every
// failure a job meets on its way to an honest provider, too few for a
// submitter to make a job's entry a burden on every view.
const MaxAvoid = 16

// requeueOverhead bounds what a requeue envelope adds around its
// declarations: the message's JSON (kind, time, nonce, the body's field
// name) and the signed envelope (public key, payload type, signature).
const requeueOverhead = 1024

// requeueBudget is what a requeue's declarations may take once encoded:
// each is base64 inside the JSON body, so it costs 4/3 of its size.
const requeueBudget = p2p.MaxPayload - requeueOverhead

// requeueCost is what one declaration envelope adds to a requeue body: its
// base64 text, its quotes and a comma.
func requeueCost(envelope []byte) int { return base64.StdEncoding.EncodedLen(len(envelope)) + 3 }

// MaxDeclarationEnvelope is the largest signed declaration that can still
// be re-announced alone in a requeue. A larger one would be announced once
// and then never again, so submit refuses it.
var MaxDeclarationEnvelope = base64.StdEncoding.DecodedLen(requeueBudget - 3)

// RequeueBatches splits declaration envelopes into the bodies of requeue
// messages that each fit the gossip size limit, keeping their order. An
// envelope over MaxDeclarationEnvelope is left out and returned apart.
func RequeueBatches(envelopes [][]byte) (batches [][][]byte, tooLarge [][]byte) {
	var cur [][]byte
	size := 0
	for _, e := range envelopes {
		c := requeueCost(e)
		if c > requeueBudget {
			tooLarge = append(tooLarge, e)
			continue
		}
		if size+c > requeueBudget && len(cur) > 0 {
			batches = append(batches, cur)
			cur, size = nil, 0
		}
		cur = append(cur, e)
		size += c
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches, tooLarge
}

// CheckRequeue verifies every wrapped declaration: signed by the wrapper's
// signer, and valid.
func CheckRequeue(s p2p.Signed) ([]p2p.Signed, error) { return CheckRequeueKnown(s, nil) }

// CheckRequeueKnown is CheckRequeue for a peer that has verified some of
// the declarations before: known reports whether these exact bytes were
// verified already as a declaration by signer, and those are not verified
// again (a queue of thousands is re-announced every few heartbeats).
// Their place in the result is left empty.
func CheckRequeueKnown(s p2p.Signed, known func(raw []byte, signer peer.ID) bool) ([]p2p.Signed, error) {
	var b RequeueBody
	if err := s.Decode(&b); err != nil {
		return nil, err
	}
	if len(b.Declarations) == 0 {
		return nil, errors.New("requeue carries no declaration")
	}
	if err := checkAvoid(b, s.Signer, s.Time()); err != nil {
		return nil, err
	}
	out := make([]p2p.Signed, 0, len(b.Declarations))
	for i, raw := range b.Declarations {
		if known != nil && known(raw, s.Signer) {
			out = append(out, p2p.Signed{})
			continue
		}
		inner, err := p2p.Open(raw)
		if err != nil {
			return nil, fmt.Errorf("requeue declarations[%d]: %w", i, err)
		}
		if inner.Signer != s.Signer {
			return nil, fmt.Errorf("%w: requeue by %s carries a declaration signed by %s", p2p.ErrForged, s.Signer, inner.Signer)
		}
		if inner.Message.Kind != KindDeclaration {
			return nil, fmt.Errorf("requeue declarations[%d] is a %q", i, inner.Message.Kind)
		}
		var db DeclarationBody
		if err := inner.Decode(&db); err != nil {
			return nil, err
		}
		if err := db.Check(); err != nil {
			return nil, fmt.Errorf("requeue declarations[%d]: %w", i, err)
		}
		out = append(out, inner)
	}
	return out, nil
}

// AcceptedAvoid returns the avoid lists of a requeue message that the jobs
// topic's validator has accepted. Most requeues carry none, and their
// declarations are not decoded a second time to find out.
func AcceptedAvoid(s p2p.Signed) []AvoidEntry {
	if !bytes.Contains(s.Message.Body, []byte(`"avoid"`)) {
		return nil
	}
	var b struct {
		Avoid []AvoidEntry `json:"avoid"`
	}
	if json.Unmarshal(s.Message.Body, &b) != nil {
		return nil
	}
	return b.Avoid
}

// AcceptedRequeue returns the declarations of a requeue message that the
// jobs topic's validator has accepted (CheckRequeue passed on these very
// bytes), without verifying their signatures again: a queue of thousands
// is re-announced every few heartbeats, and every peer would otherwise pay
// for each signature twice.
func AcceptedRequeue(s p2p.Signed) ([]p2p.Signed, error) {
	var b RequeueBody
	if err := s.Decode(&b); err != nil {
		return nil, err
	}
	out := make([]p2p.Signed, 0, len(b.Declarations))
	for i, raw := range b.Declarations {
		inner, err := p2p.Reopen(raw)
		if err != nil {
			return nil, fmt.Errorf("requeue declarations[%d]: %w", i, err)
		}
		out = append(out, inner)
	}
	return out, nil
}

// checkAvoid checks a requeue's avoid lists: each for a job the requeue
// carries (so its signer is the job's submitter), at most once, naming
// between one and MaxAvoid distinct providers other than the signer, each
// with a time its avoid lifts (or none) within MaxAvoidFor of signed.
func checkAvoid(b RequeueBody, signer peer.ID, signed time.Time) error {
	if len(b.Avoid) == 0 {
		return nil
	}
	if len(b.Avoid) > len(b.Declarations) {
		return errors.New("requeue avoid: more entries than declarations")
	}
	carried := make(map[string]bool, len(b.Declarations))
	for _, raw := range b.Declarations {
		carried[JobIDOf(sha256.Sum256(raw))] = true
	}
	seen := make(map[string]bool, len(b.Avoid))
	for i, a := range b.Avoid {
		array, _, isTask := market.SplitTaskID(a.Job)
		if !carried[a.Job] && !(isTask && carried[array]) {
			return fmt.Errorf("requeue avoid[%d]: job %q is not among the declarations it carries", i, a.Job)
		}
		if seen[a.Job] {
			return fmt.Errorf("requeue avoid[%d]: job %s listed twice", i, a.Job)
		}
		seen[a.Job] = true
		if len(a.Providers) == 0 || len(a.Providers) > MaxAvoid {
			return fmt.Errorf("requeue avoid[%d]: %d providers, want 1 to %d", i, len(a.Providers), MaxAvoid)
		}
		if len(a.Until) != 0 && len(a.Until) != len(a.Providers) {
			return fmt.Errorf("requeue avoid[%d]: %d until times for %d providers", i, len(a.Until), len(a.Providers))
		}
		for k, u := range a.Until {
			if u <= 0 || time.UnixMilli(u).After(signed.Add(MaxAvoidFor)) {
				return fmt.Errorf("requeue avoid[%d].until[%d]: %d is not a time within %s of the announcement", i, k, u, MaxAvoidFor)
			}
		}
		for k, p := range a.Providers {
			id, err := peer.Decode(p)
			if err != nil {
				return fmt.Errorf("requeue avoid[%d].providers[%d]: %w", i, k, err)
			}
			if id == signer || id.String() != p {
				return fmt.Errorf("requeue avoid[%d].providers[%d]: %q is not another peer's ID", i, k, p)
			}
			for _, q := range a.Providers[:k] {
				if q == p {
					return fmt.Errorf("requeue avoid[%d]: provider %s listed twice", i, p)
				}
			}
		}
	}
	return nil
}

// Avoided is one provider a job avoids, until its avoid lifts.
type Avoided struct {
	Provider string
	Until    time.Time
}

// RequeueAvoiding is the body of a requeue that re-announces one job with
// its avoid list: the envelope's job's, or, where job is a task of the
// array the envelope declares, that task's. Where the list would take the
// message past the gossip size limit, the providers named first are left
// out, and after them those beyond MaxAvoid: the latest failures matter
// most. Each provider goes with the time its avoid lifts.
func RequeueAvoiding(job string, envelope []byte, avoid []Avoided) RequeueBody {
	b := RequeueBody{Declarations: [][]byte{envelope}}
	if len(avoid) == 0 {
		return b
	}
	if len(avoid) > MaxAvoid {
		avoid = avoid[len(avoid)-MaxAvoid:]
	}
	room := requeueBudget - requeueCost(envelope)
	cost := 0
	first := len(avoid)
	for first > 0 {
		c := len(avoid[first-1].Provider) + 3 + 14 // quotes and a comma; a time in ms and a comma
		if cost+c+avoidEntryOverhead > room {
			break
		}
		cost += c
		first--
	}
	if first == len(avoid) {
		return b
	}
	if a, _, ok := market.SplitTaskID(job); !ok || a != JobIDOf(sha256.Sum256(envelope)) {
		job = JobIDOf(sha256.Sum256(envelope)) // the envelope's own job
	}
	e := AvoidEntry{Job: job}
	for _, a := range avoid[first:] {
		e.Providers = append(e.Providers, a.Provider)
		e.Until = append(e.Until, max(1, a.Until.UnixMilli()))
	}
	b.Avoid = []AvoidEntry{e}
	return b
}

// avoidEntryOverhead is what an avoid entry costs besides its providers:
// the field names, the job ID and the punctuation.
const avoidEntryOverhead = 96

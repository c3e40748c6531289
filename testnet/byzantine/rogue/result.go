package rogue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/p2p"
)

// The attacks, by name, in the order of issue 51.
const (
	AttackBackdated       = "backdated proposal"
	AttackNoOffer         = "unassigned proposal, no offer"
	AttackNotAssigned     = "unassigned proposal, offer that fits"
	AttackPastLimit       = "receipts past the limit"
	AttackAfterFinal      = "receipt after the final one"
	AttackStage           = "staging a job it was not reserved"
	AttackFalseCompleted  = "final receipt: false completed"
	AttackFalseCheckpoint = "final receipt: false checkpoint_at"
	AttackCheckpointFlood = "checkpoint flood"
	AttackNoCountersign   = "submitter never countersigns"
	AttackGangSquat       = "squatting a gang part"
	AttackGangWithheld    = "gang lease never sent"
	AttackRelay           = "relay abuse"
	AttackEscapes         = "offer with terminal escapes"
)

// Step is one request of an attack and how it was answered.
type Step struct {
	What string `json:"what"`
	// Answer is "countersigned", "accepted", "disputed", "refused", "no
	// answer", "counted" or "cut".
	Answer string `json:"answer"`
	// Code is a refusal's code (node/wire), or a relay's status (circuit
	// relay v2, as PERMISSION_DENIED); "" for none.
	Code string `json:"code,omitempty"`
	// Err is a refusal's text, or why no answer came; for a step that
	// names something else (an ending), what it names.
	Err string `json:"err,omitempty"`
	// Count is what a step that counts counted (proposals that came).
	Count int `json:"count,omitempty"`
}

// Answers a Step records.
const (
	Countersigned = "countersigned"
	Accepted      = "accepted"
	Disputed      = "disputed"
	Refused       = "refused"
	NoAnswer      = "no answer"
	// Counted: the step counted something (Count), asked nothing.
	Counted = "counted"
	// Cut: what the step sent was cut off under it (a relay reset its
	// circuit).
	Cut = "cut"
)

// stepOf names how a request that returned err was answered; ok names
// the answer when err is nil.
func stepOf(what string, err error, ok string) Step {
	switch {
	case err == nil:
		return Step{What: what, Answer: ok}
	case errors.Is(err, ErrNoAnswer):
		return Step{What: what, Answer: NoAnswer, Err: err.Error()}
	}
	return Step{What: what, Answer: Refused, Code: p2p.RefusalCode(err), Err: err.Error()}
}

// receiptStep names how a receipt was answered.
func receiptStep(what string, a Answer) Step {
	switch {
	case a.Countersigned:
		return Step{What: what, Answer: Countersigned}
	case a.Disputed:
		return Step{What: what, Answer: Disputed}
	}
	return stepOf(what, a.Err, Countersigned)
}

// Result is what one attack did and won.
type Result struct {
	Attack string `json:"attack"`
	Steps  []Step `json:"steps"`
	// GPUHours is what the victim countersigned that the rogue claimed
	// beyond what it held (receipts), in GPU-hours.
	GPUHours float64 `json:"gpu_hours,omitempty"`
	// Bytes is what the rogue obtained (inputs), or what the victim
	// fetched (a checkpoint flood), as the attack says.
	Bytes int64 `json:"bytes,omitempty"`
	// Held is how long honest GPUs were held for the rogue, as the attack
	// says.
	Held time.Duration `json:"held_ns,omitempty"`
	// Concurrent is the most requests of the victim's the rogue served at
	// once (a checkpoint flood's pulls).
	Concurrent int `json:"concurrent,omitempty"`
	// Notes are figures in words, for the table.
	Notes []string `json:"notes,omitempty"`
}

// Step returns the first step named what, and whether there is one.
func (r Result) Step(what string) (Step, bool) {
	i := slices.IndexFunc(r.Steps, func(s Step) bool { return s.What == what })
	if i < 0 {
		return Step{}, false
	}
	return r.Steps[i], true
}

// Codes counts the steps' refusal codes ("" for a refusal without one),
// and the other answers under their names.
func (r Result) Codes() map[string]int {
	out := map[string]int{}
	for _, s := range r.Steps {
		if s.Answer == Refused {
			out["refused:"+s.Code]++
		} else {
			out[s.Answer]++
		}
	}
	return out
}

// note adds a figure in words.
func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Summary is what happened, in one line: each step's answer (steps of
// one name and answer counted together, in order), then the figures.
func (r Result) Summary() string {
	var parts []string
	type key struct{ what, answer, code, counted string }
	var order []key
	count := map[key]int{}
	for _, s := range r.Steps {
		k := key{what: s.What, answer: s.Answer, code: s.Code}
		if s.Answer == Counted {
			k.counted = s.Err // each count is its own
		}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	for _, k := range order {
		a := k.answer
		switch k.answer {
		case Refused:
			a = "refused, no code"
			if k.code != "" {
				a = "refused " + k.code
			} else if why := r.firstErr(k.what, k.answer); why != "" {
				a += " (" + why + ")"
			}
		case NoAnswer:
			if why := r.firstErr(k.what, k.answer); why != "" {
				a += " (" + why + ")"
			}
		case Counted:
			a = k.counted
		}
		if n := count[k]; n > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d: %s", k.what, n, a))
		} else {
			parts = append(parts, k.what+": "+a)
		}
	}
	if r.GPUHours != 0 {
		parts = append(parts, fmt.Sprintf("%s GPU-hours countersigned", thousands(r.GPUHours)))
	}
	parts = append(parts, r.Notes...)
	return strings.Join(parts, "; ")
}

// firstErr is the text of the first step named what answered answer,
// shortened to what a table row can hold: a peer's own words without the
// "peer says: " before them, or the last clause of a local error.
func (r Result) firstErr(what, answer string) string {
	for _, s := range r.Steps {
		if s.What != what || s.Answer != answer || s.Err == "" {
			continue
		}
		e := s.Err
		if i := strings.LastIndex(e, "peer says: "); i >= 0 {
			e = e[i+len("peer says: "):]
		} else if i := strings.LastIndex(e, ": "); i >= 0 && answer != Counted {
			e = e[i+2:]
		}
		if len(e) > 100 {
			e = e[:100] + "…"
		}
		return e
	}
	return ""
}

// thousands writes v with two decimals below 100, else whole, with
// thousands separated by commas.
func thousands(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.2f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

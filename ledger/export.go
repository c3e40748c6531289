package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ExportFormat tags an export file, so that a reader knows what it holds.
const ExportFormat = "e31-receipts/1"

// maxExportEntry caps one entry of an export file: a dispute holds two
// records.
const maxExportEntry = 2*MaxRecordSize + 1024

// ErrBadExport: an export file is malformed or an entry in it fails
// verification; the error names the entry.
var ErrBadExport = errors.New("export file does not verify")

// ExportFilter selects what Export writes. The zero value writes every
// entry; set fields must all match.
type ExportFilter struct {
	Job string
	// Jobs, when not nil, keeps the entries of the jobs it accepts: every
	// attempt and task of what a user submitted, which has many job IDs.
	Jobs  func(job string) bool
	Lease string
	Peer  peer.ID   // provider or submitter
	Since time.Time // entries whose held time ends at or after it
}

func (f *ExportFilter) match(e *Entry) bool {
	r := e.subject()
	return (f.Job == "" || r.Job == f.Job) && (f.Jobs == nil || f.Jobs(r.Job)) &&
		(f.Lease == "" || r.Lease == f.Lease) &&
		(f.Peer == "" || r.Provider == f.Peer || r.Submitter == f.Peer) &&
		(f.Since.IsZero() || !msTime(r.HeldUntil).Before(msTime(f.Since)))
}

// exportEntryJSON is one entry of an export file. Index and Superseded say
// where the entry stood in the exporting node's ledger; they are not
// signed, and VerifyExport recomputes what it can from the entries alone.
type exportEntryJSON struct {
	Index      uint64          `json:"index"`
	Superseded bool            `json:"superseded,omitempty"`
	Receipt    json.RawMessage `json:"receipt,omitempty"`
	Dispute    json.RawMessage `json:"dispute,omitempty"`
	// Lease is a lease's evidence (leases.go), written before the first
	// receipt of the lease: the terms both parties signed, which bound
	// the held time of its receipts. It has no index.
	Lease json.RawMessage `json:"lease,omitempty"`
	// Verdict is a submitter's verdict on replicas (verdict.go), written
	// after the entries when one of its replicas' leases is in the file.
	// It has no index.
	Verdict json.RawMessage `json:"verdict,omitempty"`
}

func exportEntryField(name string) (fieldSet, bool) {
	switch name {
	case "index", "superseded":
		return nil, true
	case "receipt":
		return receiptField, true
	case "dispute":
		return disputeField, true
	case "lease":
		return evidenceField, true
	case "verdict":
		return verdictField, true
	}
	return nil, false
}

// Export writes the selected entries to w as one JSON document:
//
//	{"format":"e31-receipts/1","entries":[{"lease":{…}}, {"index":…,"receipt":{…}}, {"index":…,"dispute":{…}}]}
//
// Every receipt, one-sided record (with its lease evidence) and dispute
// carries its signatures, and every signer is named by a peer ID that
// embeds its public key, so VerifyExport can check the file anywhere with
// nothing else. Before the first receipt of each lease whose evidence this
// node kept comes that evidence, so that VerifyExport checks the held time
// of the lease's receipts against its terms. After the entries come the
// verdicts kept that name a lease of the file, which VerifyExport checks
// against the final receipts. The file is a selection, not the hash chain: it proves what
// each party signed, not that the exporting node's ledger is whole. Export
// returns the number of entries written.
func (l *Ledger) Export(ctx context.Context, w io.Writer, f ExportFilter) (int, error) {
	es, err := l.All(ctx)
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\"format\":%q,\"entries\":[", ExportFormat)
	n := 0
	lines := 0 // entries and leases written, for the commas between them
	put := func(b []byte) {
		if lines > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n")
		bw.Write(b)
		lines++
	}
	written := map[string]bool{} // leases whose evidence was looked for
	for i := range es {
		e := &es[i]
		if !f.match(e) {
			continue
		}
		if lease := e.subject().Lease; !written[lease] {
			written[lease] = true
			ev, ok, err := l.KeptLease(ctx, lease)
			if err != nil {
				return n, fmt.Errorf("export: %w", err)
			}
			if ok {
				b, err := json.Marshal(exportEntryJSON{Lease: ev.marshal()})
				if err != nil {
					return n, fmt.Errorf("export lease %s: %w", lease, err)
				}
				put(b)
			}
		}
		x := exportEntryJSON{Index: e.Index, Superseded: e.Superseded}
		var err error
		if e.Dispute != nil {
			w := e.Dispute.wire(nil)
			x.Dispute, err = json.Marshal(&w)
		} else {
			x.Receipt, err = e.Receipt.MarshalJSON()
		}
		if err != nil {
			return n, fmt.Errorf("export entry %d: %w", e.Index, err)
		}
		b, err := json.Marshal(&x)
		if err != nil {
			return n, fmt.Errorf("export entry %d: %w", e.Index, err)
		}
		put(b)
		n++
	}
	if err := l.exportVerdicts(ctx, written, put); err != nil {
		return n, err
	}
	bw.WriteString("\n]}\n")
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("export: %w", err)
	}
	return n, nil
}

// ExportReport is what VerifyExport found in a file that verifies.
type ExportReport struct {
	Entries  int `json:"entries"`
	TwoSided int `json:"two_sided"` // receipts signed by both parties
	// OneSided counts one-sided records whose lease has no two-sided final
	// receipt in the file; Superseded those whose lease has one.
	OneSided   int `json:"one_sided"`
	Superseded int `json:"superseded"`
	Disputes   int `json:"disputes"`
	// Leases counts the leases' evidence in the file, which bounds their
	// receipts' held time; Unbounded the leases of receipts that no
	// bounded evidence covers (signed before the rule, or exported
	// without it).
	Leases    int `json:"leases"`
	Unbounded int `json:"unbounded"`
	// Verdicts counts the verdicts checked (verdict.go);
	// VerdictsWithoutReceipts those of them naming a replica whose final
	// receipt is not in the file, checked there by signature and
	// majority alone.
	Verdicts                int `json:"verdicts,omitempty"`
	VerdictsWithoutReceipts int `json:"verdicts_without_receipts,omitempty"`
	// Held sums what the file's leases held and what of it DefaultPolicy
	// makes owed (the leases the file's verdicts name losers not owed), each lease counted once as the ledger counts it
	// (SumEntries): the totals the signatures just checked vouch for. Set
	// only for a file that verifies.
	Held HeldSum `json:"held"`
}

// exportBounds checks the receipts of an export file against their
// leases' terms: those of the file's lease entries, else a one-sided
// record's own evidence.
type exportBounds struct {
	unbounded map[string]bool // leases with a receipt no bounded terms cover
}

func (b *exportBounds) check(r *Receipt, terms map[string]LeaseTerms) error {
	t, ok := terms[r.Lease]
	if !ok && r.Evidence != nil {
		var err error
		if t, err = r.Evidence.Parse(); err != nil {
			return err // its signatures are checked with the record's
		}
		ok = true
	}
	if _, _, bounded := t.HeldWindow(); !ok || !bounded {
		if b.unbounded == nil {
			b.unbounded = map[string]bool{}
		}
		b.unbounded[r.Lease] = true
		return nil
	}
	return CheckHeld(r, t)
}

// VerifyExport reads a file Export wrote and checks every signature in it
// with the public keys inside the peer IDs it names: no daemon, no network.
// It decodes as strictly as DecodeReceipt (unknown or repeated fields,
// trailing data and oversized entries are refused) and names the first
// entry that fails, with ErrBadExport; the report then counts the entries
// before it. Signatures are checked in batches on all available CPUs (see
// batch.go) while the file is read.
func VerifyExport(r io.Reader) (ExportReport, error) {
	return verifyExport(r, runtime.GOMAXPROCS(0))
}

// exportSeen is what VerifyExport keeps of each entry until it knows how
// far the file verifies.
type exportSeen struct {
	index uint64 // as the file states it
	kind  entryKind
}

// verifyExport checks signatures on the given number of goroutines (1:
// inline).
func verifyExport(r io.Reader, workers int) (ExportReport, error) {
	dec := json.NewDecoder(r)
	fail := func(format string, args ...any) (ExportReport, error) {
		return ExportReport{}, fmt.Errorf("%w: %s", ErrBadExport, fmt.Sprintf(format, args...))
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fail("not a JSON object")
	}
	if tok, err := dec.Token(); err != nil || tok != "format" {
		return fail("the first field must be \"format\"")
	}
	var format string
	if err := dec.Decode(&format); err != nil || format != ExportFormat {
		return fail("format %q, want %q", format, ExportFormat)
	}
	if tok, err := dec.Token(); err != nil || tok != "entries" {
		return fail("the second field must be \"entries\"")
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fail("entries: not an array")
	}

	var (
		seen     []exportSeen
		entries  []Entry // the receipts and disputes, for the sum of held time
		keys     = map[peer.ID]*pubKey{}
		oneSided = map[string]int{}
		settled  = map[string]bool{}
		terms    = map[string]LeaseTerms{} // from the file's lease entries
		bounded  = exportBounds{}
		verdicts exportVerdicts
		sigs     = newSigChecker(context.Background(), workers)
		// The first failure found while reading: its position (entry
		// number, 1-based) and message. A signature failure still being
		// checked may turn out to come earlier.
		failAt  = uint64(math.MaxUint64)
		failMsg string
	)
	failed := func(pos uint64, format string, args ...any) {
		failAt, failMsg = pos, fmt.Sprintf(format, args...)
	}
	for dec.More() {
		pos := uint64(len(seen) + 1)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			failed(pos, "entry #%d: %v", pos, err)
			break
		}
		if len(raw) > maxExportEntry {
			failed(pos, "entry #%d: %d bytes, at most %d", pos, len(raw), maxExportEntry)
			break
		}
		e, ev, vd, err := decodeExportEntry(raw)
		if err != nil {
			failed(pos, "entry #%d: %v", pos, err)
			break
		}
		if vd != nil {
			if err := vd.Verify(); err != nil {
				failed(pos, "entry #%d (verdict on %s): %v", pos, vd.Job, err)
				break
			}
			verdicts.add(pos, vd)
			seen = append(seen, exportSeen{kind: kindVerdict})
			continue
		}
		if ev != nil {
			t, err := ev.verify()
			if err != nil {
				failed(pos, "entry #%d (lease evidence): %v", pos, err)
				break
			}
			if _, ok := terms[t.ID]; ok {
				failed(pos, "entry #%d: lease %s's evidence given twice", pos, t.ID)
				break
			}
			terms[t.ID] = t
			seen = append(seen, exportSeen{kind: kindLease})
			continue
		}
		job, kind, err := exportJob(keys, pos, &e)
		if err != nil {
			failed(pos, "%s: %v", exportEntryName(pos, e.Index, &job), err)
			break
		}
		if kind != kindDispute {
			if err := bounded.check(&e.Receipt, terms); err != nil {
				failed(pos, "%s: %v", exportEntryName(pos, e.Index, &job), err)
				break
			}
		}
		switch r := &e.Receipt; {
		case kind == kindOneSided:
			oneSided[r.Lease]++
		case kind == kindReceipt && r.Final:
			settled[r.Lease] = true
		}
		seen = append(seen, exportSeen{index: e.Index, kind: kind})
		entries = append(entries, e)
		sigs.check(job)
	}
	if failAt == math.MaxUint64 {
		switch tok, err := dec.Token(); {
		case err != nil || tok != json.Delim(']'):
			failed(failAt, "entries: unterminated array")
		default:
			if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
				failed(failAt, "fields after \"entries\"")
			} else if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				failed(failAt, "data after the document")
			}
		}
	}
	if failMsg == "" {
		if pos, err := verdicts.check(entries); err != nil {
			failed(pos, "entry #%d: %v", pos, err)
		}
	}
	if bad := sigs.wait(); bad != nil && bad.job.pos <= failAt {
		failAt = bad.job.pos
		failMsg = fmt.Sprintf("%s: %v", exportEntryName(failAt, seen[failAt-1].index, &bad.job), bad.err)
	}

	var rep ExportReport
	for i := range seen {
		if uint64(i+1) >= failAt {
			break
		}
		if seen[i].kind == kindLease {
			rep.Leases++
			continue
		}
		if seen[i].kind == kindVerdict {
			rep.Verdicts++
			continue
		}
		rep.Entries++
		switch seen[i].kind {
		case kindReceipt:
			rep.TwoSided++
		case kindDispute:
			rep.Disputes++
		}
	}
	if failMsg != "" {
		return rep, fmt.Errorf("%w: %s", ErrBadExport, failMsg)
	}
	rep.Unbounded = len(bounded.unbounded)
	rep.VerdictsWithoutReceipts = verdicts.withoutReceipts
	rep.Held = SumEntries(entries, DefaultPolicy().WithLost(verdicts.all()), nil)
	for lease, n := range oneSided {
		if settled[lease] {
			rep.Superseded += n
		} else {
			rep.OneSided += n
		}
	}
	return rep, nil
}

// exportJob is the signature check of an export entry at pos. An error is
// a signer whose peer ID holds no usable key.
func exportJob(keys map[peer.ID]*pubKey, pos uint64, e *Entry) (sigJob, entryKind, error) {
	if e.Dispute != nil {
		return sigJob{pos: pos, r: e.Dispute.Ours, dispute: e.Dispute}, kindDispute, nil
	}
	r := &e.Receipt
	job := sigJob{pos: pos, r: *r, msg: r.SigningBytes()}
	if r.OneSided() {
		k, err := cachedKey(keys, r.signerID())
		if err != nil {
			return job, kindOneSided, fmt.Errorf("%s: %w", r.Signer, err)
		}
		job.provider, job.submitter = k, k
		return job, kindOneSided, nil
	}
	var err error
	if job.provider, err = cachedKey(keys, r.Provider); err != nil {
		return job, kindReceipt, fmt.Errorf("provider: %w", err)
	}
	if job.submitter, err = cachedKey(keys, r.Submitter); err != nil {
		return job, kindReceipt, fmt.Errorf("submitter: %w", err)
	}
	return job, kindReceipt, nil
}

// exportEntryName names an entry of an export file in an error.
func exportEntryName(pos, index uint64, j *sigJob) string {
	if j.dispute != nil {
		return fmt.Sprintf("entry #%d (index %d, lease %s, dispute)", pos, index, j.dispute.Lease)
	}
	return fmt.Sprintf("entry #%d (index %d, lease %s, seq %d)", pos, index, j.r.Lease, j.r.Seq)
}

// decodeExportEntry decodes one entry of an export file: a receipt or a
// dispute (the Entry), a lease's evidence (ev set, the Entry zero) or a
// verdict (vd set, the Entry zero).
func decodeExportEntry(raw []byte) (e Entry, ev *LeaseEvidence, vd *Verdict, err error) {
	if err := checkKeys(raw, exportEntryField); err != nil {
		return Entry{}, nil, nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	var x exportEntryJSON
	if err := d.Decode(&x); err != nil {
		return Entry{}, nil, nil, err
	}
	e = Entry{Index: x.Index, Superseded: x.Superseded}
	if x.Verdict != nil {
		if x.Lease != nil || x.Receipt != nil || x.Dispute != nil || x.Index != 0 || x.Superseded {
			return Entry{}, nil, nil, errors.New("a verdict entry holds the verdict alone")
		}
		v, err := UnmarshalVerdict(x.Verdict)
		if err != nil {
			return Entry{}, nil, nil, fmt.Errorf("verdict: %w", err)
		}
		return Entry{}, nil, &v, nil
	}
	e, ev, err = decodeExportRecord(x, e)
	return e, ev, nil, err
}

// decodeExportRecord decodes what an entry other than a verdict holds.
func decodeExportRecord(x exportEntryJSON, e Entry) (Entry, *LeaseEvidence, error) {
	var ev *LeaseEvidence
	switch {
	case x.Lease != nil && x.Receipt == nil && x.Dispute == nil && x.Index == 0 && !x.Superseded:
		d := json.NewDecoder(bytes.NewReader(x.Lease))
		d.DisallowUnknownFields()
		var w evidenceJSON
		if err := d.Decode(&w); err != nil {
			return Entry{}, nil, fmt.Errorf("lease: %w", err)
		}
		ev = &LeaseEvidence{Terms: json.RawMessage(w.Terms), ProviderSig: w.ProviderSig, SubmitterSig: w.SubmitterSig}
		if err := ev.validate(); err != nil {
			return Entry{}, nil, fmt.Errorf("lease: %w", err)
		}
		return Entry{}, ev, nil
	case x.Receipt != nil && x.Dispute == nil && x.Lease == nil:
		// Without DecodeReceipt's text rule: an export may hold receipts
		// stored before it, and what prints them escapes their text.
		r, err := decodeReceipt(x.Receipt)
		if err != nil {
			return Entry{}, nil, err
		}
		e.Receipt = r
	case x.Dispute != nil && x.Receipt == nil && x.Lease == nil:
		d := json.NewDecoder(bytes.NewReader(x.Dispute))
		d.DisallowUnknownFields()
		var w disputeJSON
		if err := d.Decode(&w); err != nil {
			return Entry{}, nil, fmt.Errorf("dispute: %w", err)
		}
		dp, err := w.dispute(nil)
		if err != nil {
			return Entry{}, nil, fmt.Errorf("dispute: %w", err)
		}
		e.Dispute = &dp
	default:
		return Entry{}, nil, errors.New("an entry holds exactly one of receipt, dispute, lease and verdict (a lease or verdict without index)")
	}
	return e, nil, nil
}

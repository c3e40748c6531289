package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Job   string
	Lease string
	Peer  peer.ID   // provider or submitter
	Since time.Time // entries whose held time ends at or after it
}

func (f *ExportFilter) match(e *Entry) bool {
	r := e.subject()
	return (f.Job == "" || r.Job == f.Job) &&
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
}

func exportEntryField(name string) (fieldSet, bool) {
	switch name {
	case "index", "superseded":
		return nil, true
	case "receipt":
		return receiptField, true
	case "dispute":
		return disputeField, true
	}
	return nil, false
}

// Export writes the selected entries to w as one JSON document:
//
//	{"format":"e31-receipts/1","entries":[{"index":…,"receipt":{…}}, {"index":…,"dispute":{…}}]}
//
// Every receipt, one-sided record (with its lease evidence) and dispute
// carries its signatures, and every signer is named by a peer ID that
// embeds its public key, so VerifyExport can check the file anywhere with
// nothing else. The file is a selection, not the hash chain: it proves what
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
	for i := range es {
		e := &es[i]
		if !f.match(e) {
			continue
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
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n")
		bw.Write(b)
		n++
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
}

// VerifyExport reads a file Export wrote and checks every signature in it
// with the public keys inside the peer IDs it names: no daemon, no network.
// It decodes as strictly as DecodeReceipt (unknown or repeated fields,
// trailing data and oversized entries are refused) and stops at the first
// entry that fails, naming it, with ErrBadExport.
func VerifyExport(r io.Reader) (ExportReport, error) {
	var rep ExportReport
	dec := json.NewDecoder(r)
	fail := func(format string, args ...any) (ExportReport, error) {
		return rep, fmt.Errorf("%w: %s", ErrBadExport, fmt.Sprintf(format, args...))
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
	oneSided := map[string]int{}
	settled := map[string]bool{}
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail("entry #%d: %v", i+1, err)
		}
		if len(raw) > maxExportEntry {
			return fail("entry #%d: %d bytes, at most %d", i+1, len(raw), maxExportEntry)
		}
		e, err := decodeExportEntry(raw)
		if err != nil {
			return fail("entry #%d: %v", i+1, err)
		}
		name := fmt.Sprintf("entry #%d (index %d, lease %s", i+1, e.Index, e.subject().Lease)
		if e.Dispute != nil {
			if err := e.Dispute.Verify(); err != nil {
				return fail("%s, dispute): %v", name, err)
			}
			rep.Disputes++
		} else {
			r := &e.Receipt
			if err := r.Verify(); err != nil {
				return fail("%s, seq %d): %v", name, r.Seq, err)
			}
			switch {
			case r.OneSided():
				oneSided[r.Lease]++
			default:
				rep.TwoSided++
				if r.Final {
					settled[r.Lease] = true
				}
			}
		}
		rep.Entries++
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return fail("entries: unterminated array")
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fail("fields after \"entries\"")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail("data after the document")
	}
	for lease, n := range oneSided {
		if settled[lease] {
			rep.Superseded += n
		} else {
			rep.OneSided += n
		}
	}
	return rep, nil
}

func decodeExportEntry(raw []byte) (Entry, error) {
	if err := checkKeys(raw, exportEntryField); err != nil {
		return Entry{}, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	var x exportEntryJSON
	if err := d.Decode(&x); err != nil {
		return Entry{}, err
	}
	e := Entry{Index: x.Index, Superseded: x.Superseded}
	switch {
	case x.Receipt != nil && x.Dispute == nil:
		r, err := DecodeReceipt(x.Receipt)
		if err != nil {
			return Entry{}, err
		}
		e.Receipt = r
	case x.Dispute != nil && x.Receipt == nil:
		d := json.NewDecoder(bytes.NewReader(x.Dispute))
		d.DisallowUnknownFields()
		var w disputeJSON
		if err := d.Decode(&w); err != nil {
			return Entry{}, fmt.Errorf("dispute: %w", err)
		}
		dp, err := w.dispute(nil)
		if err != nil {
			return Entry{}, fmt.Errorf("dispute: %w", err)
		}
		e.Dispute = &dp
	default:
		return Entry{}, errors.New("an entry holds exactly one of receipt and dispute")
	}
	return e, nil
}

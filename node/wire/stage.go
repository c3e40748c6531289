package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Staging from many sources. A provider about to stage a job's inputs,
// leased or only reserved for the job, asks the submitter (ProtoStage),
// which lets it fetch them and names the other providers that hold them for
// its jobs; before naming one, the submitter asks it (ProtoRelay) to serve
// the data to the new provider. A provider passes on only what it holds for
// the submitter who asks, and only to whom that submitter names.
const (
	// ProtoStage: provider → submitter, may I stage this job's inputs
	// now, and from whom?
	ProtoStage protocol.ID = "/e31/stage/1"
	// ProtoRelay: submitter → provider, serve a root you hold for my jobs
	// to this other provider of mine.
	ProtoRelay protocol.ID = "/e31/relay/1"
)

// CodeNotReserved: the submitter refuses a staging request from a provider
// that neither holds the job's lease nor is reserved for it in the
// submitter's last match.
const CodeNotReserved = "not-reserved"

// CodeNotHeld: a provider refuses to relay a root it does not hold, whole,
// for the asking submitter.
const CodeNotHeld = "not-held"

// maxStageRoots bounds the roots of one staging reply; a job names a few
// inputs, an image and a checkpoint.
const maxStageRoots = 64

// maxSourcesPerRoot bounds the providers named for one root.
const maxSourcesPerRoot = 16

// StageBeforeLeaseMax bounds how long a provider stages a queued job's
// inputs before it proposes the lease; its submitter does not take the
// wait for squatting (a provider Match gives the job that does not
// propose) until then.
const StageBeforeLeaseMax = 10 * time.Minute

// StageRequest asks to stage a job's inputs (ProtoStage). Lease is empty
// when the provider stages before the lease: reserved for the job, or
// given it by Match with its GPUs free.
type StageRequest struct {
	Job   string `json:"job"`
	Lease string `json:"lease,omitempty"`
}

// StageReply names, for each of the job's roots that other providers hold,
// those that agreed to serve it to the requester.
type StageReply struct {
	Sources []RootSources `json:"sources,omitempty"`
	// Staging names, for roots no provider holds yet, the providers
	// fetching them now for the submitter's other leases, that began
	// before the requester: waiting for one of them to finish and then
	// fetching from it spares the submitter's uplink a second copy.
	Staging []RootSources `json:"staging,omitempty"`
}

// RootSources is one root and the providers that hold it.
type RootSources struct {
	Root      string   `json:"root"`
	Providers []string `json:"providers"`
}

// RelayRequest asks a provider to serve Root to the provider To
// (ProtoRelay).
type RelayRequest struct {
	Root string `json:"root"`
	To   string `json:"to"`
}

// CheckStage checks a staging request's fields.
func CheckStage(r StageRequest) error {
	if r.Job == "" || len(r.Job) > 128 || len(r.Lease) > 128 {
		return errors.New("stage request: job must be 1 to 128 bytes, lease at most 128")
	}
	return nil
}

// Parsed returns a reply's sources as parsed values, checked: a root or
// provider that does not parse, or a reply over its bounds, is an error.
func (r StageReply) Parsed() (map[cid.Cid][]peer.ID, error) {
	return parseSources(r.Sources)
}

// ParsedStaging returns the reply's staging providers, checked as Parsed.
func (r StageReply) ParsedStaging() (map[cid.Cid][]peer.ID, error) {
	return parseSources(r.Staging)
}

func parseSources(list []RootSources) (map[cid.Cid][]peer.ID, error) {
	if len(list) > maxStageRoots {
		return nil, fmt.Errorf("stage reply: %d roots, at most %d", len(list), maxStageRoots)
	}
	out := make(map[cid.Cid][]peer.ID, len(list))
	for _, rs := range list {
		c, err := cid.Decode(rs.Root)
		if err != nil {
			return nil, fmt.Errorf("stage reply: root %q: %w", rs.Root, err)
		}
		if len(rs.Providers) > maxSourcesPerRoot {
			return nil, fmt.Errorf("stage reply: %d providers for %s, at most %d", len(rs.Providers), c, maxSourcesPerRoot)
		}
		for _, s := range rs.Providers {
			p, err := peer.Decode(s)
			if err != nil {
				return nil, fmt.Errorf("stage reply: provider %q: %w", s, err)
			}
			out[c] = append(out[c], p)
		}
	}
	return out, nil
}

// Parsed returns a relay request's root and provider, checked.
func (r RelayRequest) Parsed() (cid.Cid, peer.ID, error) {
	c, err := cid.Decode(r.Root)
	if err != nil {
		return cid.Undef, "", fmt.Errorf("relay request: root %q: %w", r.Root, err)
	}
	p, err := peer.Decode(r.To)
	if err != nil {
		return cid.Undef, "", fmt.Errorf("relay request: provider %q: %w", r.To, err)
	}
	return c, p, nil
}

package provider

import (
	"maps"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

// A lease's secrets (market.Secret) come with the submitter's
// countersignature, in the reply on the lease's own stream (propose.go).
// They live in the lease state's memory only (leaseState), never in its Record, which is
// written to the record store, and never in a log line: the run hands them
// to the sandbox (runjob.go, exec.Spec.Secrets: variables, and files on a
// tmpfs), and release drops them. A restart of this node loses them, as it
// ends its leases: the job goes on elsewhere and its next provider gets
// them again.

// declaredSecrets keeps the values the job's signed declaration names as
// its secrets. A submitter that sends others, or leaves one out, has its
// lease go on with those declared that came: the error says which did
// not match, by name.
func declaredSecrets(declared []market.Secret, got wire.SecretValues) (wire.SecretValues, error) {
	err := got.Match(declared)
	if len(declared) == 0 {
		return nil, err
	}
	out := make(wire.SecretValues, len(declared))
	for _, s := range declared {
		if v, ok := got[s.Name]; ok {
			out[s.Name] = v
		}
	}
	return out, err
}

// runSecrets are the values the run hands the sandbox, copied: the
// sandbox may keep its map after release dropped the runner's.
func (s *leaseState) runSecrets() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.secrets) == 0 {
		return nil
	}
	return maps.Clone(s.secrets)
}

// dropSecrets forgets the lease's secrets, at release: the bytes are
// overwritten where they lie, so that they do not linger in the heap until
// the collector reuses it.
func (s *leaseState) dropSecrets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		clear(v)
	}
	s.secrets = nil
}

package wire

import (
	"encoding/json"
	"fmt"

	"github.com/e31network/e31/market"
)

// SecretValues are a job's secrets by name (market.Secret): what the
// submitter hands the provider of a countersigned lease in its
// ProposeReply, over the lease's own stream, and nowhere else. Decoding
// bounds them as market bounds a job's secrets, so that what a peer sends
// is never more than a job may have; the values stay in the provider's
// memory and are never written to a record, log or receipt.
type SecretValues map[string][]byte

// UnmarshalJSON decodes the values and refuses more secrets, larger
// values or names other than market allows.
func (v *SecretValues) UnmarshalJSON(b []byte) error {
	var m map[string][]byte
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if err := checkSecretValues(m); err != nil {
		return err
	}
	*v = m
	return nil
}

// checkSecretValues checks values against market's bounds alone: which
// names the job declares is the caller's to check (Match).
func checkSecretValues(m map[string][]byte) error {
	if len(m) > market.MaxSecrets {
		return fmt.Errorf("%d secrets, over the %d a job may have", len(m), market.MaxSecrets)
	}
	total := 0
	for name, val := range m {
		if !market.ValidSecretName(name) {
			return fmt.Errorf("secret name %q is not one a job may declare", name)
		}
		if len(val) > market.MaxSecretBytes {
			return fmt.Errorf("secret %s is %d bytes, over %d", name, len(val), market.MaxSecretBytes)
		}
		total += len(val)
	}
	if total > market.MaxSecretsBytes {
		return fmt.Errorf("secrets of %d bytes together, over %d", total, market.MaxSecretsBytes)
	}
	return nil
}

// Match checks the values against the secrets the job's signed
// declaration names: one for each, and none other.
func (v SecretValues) Match(declared []market.Secret) error {
	return market.CheckSecretValues(declared, v)
}

package market

import (
	"fmt"
	"slices"
	"strings"
)

// A Secret names a value the job reads that no peer but the provider
// running it may see: an API token for Hugging Face, W&B or S3. Every peer
// reads a declaration (work.env included), so the value is never in one:
// the declaration carries the name alone, signed and broadcast with the
// rest, and the submitter's node keeps the value and hands it to the
// provider over the lease's own stream once the lease is countersigned.
// The job finds it as the variable Name and as the file SecretsPath/Name.
type Secret struct {
	Name string `json:"name" yaml:"name"`
	// From says where the submitting command reads the value, with its
	// caller's rights: "env" (the variable Name; the default), "env:OTHER"
	// (the variable OTHER) or "file:PATH" (a declaration file's relative
	// PATH is taken from the file's folder). It is the submitter's own
	// business, like labels: taken out before the declaration is signed,
	// and refused in a broadcast one.
	From string `json:"from,omitempty" yaml:"from,omitempty"`
}

// Bounds of a job's secrets. A secret is a token or a small credentials
// file, not data: the values travel in one reply of the lease's stream
// (whose frames are at most 1 MiB, base64 adding a third) and sit in the
// sandbox's environment, which the kernel bounds to a quarter of the stack.
const (
	MaxSecrets       = 32
	MaxSecretBytes   = 64 << 10
	MaxSecretsBytes  = 256 << 10
	maxSecretNameLen = 128
)

// SecretsPath is the folder in the sandbox where each secret is a file of
// its own. A declaration with secrets mounts nothing there.
const SecretsPath = "/run/secrets"

// Where a secret's value is read from (Secret.Source).
const (
	SecretFromEnv  = "env"
	SecretFromFile = "file"
)

// secretReserved are the variables the provider sets in every sandbox, or
// in a gang's parts: a secret of one of these names would be overwritten,
// or would overwrite what the sandbox needs. Every E31_ name is reserved
// too (reservedSecretName).
var secretReserved = []string{
	"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PATH", "HOME", "LD_LIBRARY_PATH",
	EnvWorldSize, EnvRank, "MASTER_ADDR", "MASTER_PORT",
	"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
}

func reservedSecretName(name string) bool {
	return strings.HasPrefix(name, "E31_") || slices.Contains(secretReserved, name)
}

// Source splits From into where the value is read and what names it
// there: ("env", NAME), ("env", OTHER) or ("file", PATH). From must be
// valid (Validate).
func (s Secret) Source() (kind, arg string) {
	switch {
	case s.From == "" || s.From == SecretFromEnv:
		return SecretFromEnv, s.Name
	case strings.HasPrefix(s.From, SecretFromEnv+":"):
		return SecretFromEnv, strings.TrimPrefix(s.From, SecretFromEnv+":")
	default:
		return SecretFromFile, strings.TrimPrefix(s.From, SecretFromFile+":")
	}
}

// SecretNames lists the names of secrets, in order.
func SecretNames(secrets []Secret) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = s.Name
	}
	return out
}

// validateSecrets checks a declaration's secrets: at most MaxSecrets,
// each a variable name given once, none that the declaration's env sets
// or the provider sets itself, each From well formed.
func validateSecrets(secrets []Secret, env map[string]string, ps *problems) {
	if len(secrets) > MaxSecrets {
		ps.add("secrets", "must list at most %d secrets, not %d", MaxSecrets, len(secrets))
	}
	seen := make(map[string]bool, len(secrets))
	for i, s := range secrets {
		f := fmt.Sprintf("secrets[%d]", i)
		if msg := checkSecretName(s.Name); msg != "" {
			ps.add(f+".name", "%s", msg)
		} else if seen[s.Name] {
			ps.add(f+".name", "names %s twice", s.Name)
		} else if _, ok := env[s.Name]; ok {
			ps.add(f+".name", "%s is in work.env too: a variable is either broadcast in work.env or kept secret, not both", s.Name)
		}
		seen[s.Name] = true
		if s.From != "" {
			if msg := checkSecretFrom(s.From); msg != "" {
				ps.add(f+".from", "%s", msg)
			}
		}
	}
}

// ValidSecretName reports whether name may name a secret: a variable
// name, not one the provider sets itself.
func ValidSecretName(name string) bool { return checkSecretName(name) == "" }

// checkSecretName says what is wrong with a secret's name, or "".
func checkSecretName(name string) string {
	switch {
	case name == "":
		return "is required: the variable the job reads, such as HF_TOKEN"
	case len(name) > maxSecretNameLen:
		return fmt.Sprintf("must be at most %d characters", maxSecretNameLen)
	case !validEnvName(name):
		return fmt.Sprintf("must be a variable name of letters, digits and _ that does not start with a digit, not %q", name)
	case reservedSecretName(name):
		return fmt.Sprintf("%s is set by the provider in every sandbox and cannot be a secret", name)
	}
	return ""
}

// checkSecretFrom says what is wrong with a secret's from, or "".
func checkSecretFrom(from string) string {
	const want = "must be env, env:NAME or file:PATH"
	kind, arg, found := strings.Cut(from, ":")
	switch {
	case kind == SecretFromEnv && !found:
		return ""
	case kind == SecretFromEnv && !validEnvName(arg):
		return fmt.Sprintf("%s: %q is not a variable name", want, arg)
	case kind == SecretFromEnv:
		return ""
	case kind == SecretFromFile && found && arg != "" && !strings.ContainsRune(arg, 0) && len(arg) <= 4096:
		return ""
	}
	return fmt.Sprintf("%s, not %q", want, from)
}

// ParseSecret reads a secret as a command line gives it: NAME (the value
// of the caller's variable NAME), NAME=env:OTHER, or NAME=file:PATH.
func ParseSecret(flag string) (Secret, error) {
	name, from, _ := strings.Cut(flag, "=")
	s := Secret{Name: name, From: from}
	if msg := checkSecretName(name); msg != "" {
		return Secret{}, fmt.Errorf("secret %q: the name %s", flag, msg)
	}
	if from != "" {
		if msg := checkSecretFrom(from); msg != "" {
			return Secret{}, fmt.Errorf("secret %q: the source %s", flag, msg)
		}
	}
	return s, nil
}

// CheckSecretValues checks the values given for a declaration's secrets:
// one for each secret declared and none other, each at most
// MaxSecretBytes, all together at most MaxSecretsBytes. The error names
// secrets, never a value.
func CheckSecretValues(secrets []Secret, values map[string][]byte) error {
	var ps problems
	total := 0
	for i, s := range secrets {
		v, ok := values[s.Name]
		f := fmt.Sprintf("secrets[%d]", i)
		switch {
		case !ok:
			ps.add(f, "no value was given for %s", s.Name)
		case len(v) > MaxSecretBytes:
			ps.add(f, "the value of %s is %d bytes; a secret may be at most %d", s.Name, len(v), MaxSecretBytes)
		}
		total += len(v)
	}
	for _, name := range sortedKeys(values) {
		if !slices.ContainsFunc(secrets, func(s Secret) bool { return s.Name == name }) {
			ps.add("secrets", "a value was given for %s, which the declaration does not name as a secret", name)
		}
	}
	if total > MaxSecretsBytes {
		ps.add("secrets", "the values are %d bytes together; a job's secrets may be at most %d", total, MaxSecretsBytes)
	}
	return ps.err()
}

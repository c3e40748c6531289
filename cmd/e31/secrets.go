package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/e31network/e31/market"
)

// A job's secrets (market.Secret) are read here, with the rights of the
// person running e31, and go to the daemon in the submit request, apart
// from the declaration: the daemon signs and broadcasts the names alone,
// and hands the values to the job's provider only (docs/using.md,
// "Secrets").

// secretFlags parses --secret NAME[=env:VAR|file:PATH] flags; a relative
// PATH is taken from the working folder.
func secretFlags(flags []string) ([]market.Secret, error) {
	var out []market.Secret
	for _, f := range flags {
		s, err := market.ParseSecret(f)
		if err != nil {
			return nil, fmt.Errorf("--secret: %w", err)
		}
		if kind, p := s.Source(); kind == market.SecretFromFile && !filepath.IsAbs(p) {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, fmt.Errorf("--secret %s: %w", f, err)
			}
			s.From = market.SecretFromFile + ":" + abs
		}
		if slices.ContainsFunc(out, func(o market.Secret) bool { return o.Name == s.Name }) {
			return nil, fmt.Errorf("--secret %s: %s is given twice", f, s.Name)
		}
		out = append(out, s)
	}
	return out, nil
}

// addSecrets adds the secrets given by flags to a job's declaration: one
// the declaration names already is read from where the flag says.
func addSecrets(d *market.Declaration, flags []market.Secret) {
	for _, f := range flags {
		i := slices.IndexFunc(d.Secrets, func(s market.Secret) bool { return s.Name == f.Name })
		if i < 0 {
			d.Secrets = append(d.Secrets, f)
			continue
		}
		d.Secrets[i].From = f.From
	}
}

// readSecrets reads the value of each of a declaration's secrets from
// where it says (the caller's variable, or a file), and takes out of the
// declaration where they were read: the daemon gets the names and the
// values apart, and signs only the names. A missing variable or file is an
// error that names the secret, never a value.
func readSecrets(d *market.Declaration) (map[string][]byte, error) {
	if len(d.Secrets) == 0 {
		return nil, nil
	}
	values := make(map[string][]byte, len(d.Secrets))
	for i, s := range d.Secrets {
		kind, arg := s.Source()
		switch kind {
		case market.SecretFromEnv:
			v, ok := os.LookupEnv(arg)
			if !ok {
				return nil, fmt.Errorf("secret %s: the variable %s is not set in this shell (set it, or name where to read the value: --secret %s=file:PATH)", s.Name, arg, s.Name)
			}
			values[s.Name] = []byte(v)
		default:
			b, err := readSecretFile(arg)
			if err != nil {
				return nil, fmt.Errorf("secret %s: %w", s.Name, err)
			}
			values[s.Name] = b
		}
		d.Secrets[i].From = ""
	}
	if err := market.CheckSecretValues(d.Secrets, values); err != nil {
		return nil, err
	}
	return values, nil
}

// readSecretFile reads a secret's file, refusing one larger than a secret
// may be before reading all of it.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, market.MaxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > market.MaxSecretBytes {
		return nil, fmt.Errorf("%s: over the %d bytes a secret may be (a secret is a token or a small credentials file; stage data as an input)", path, market.MaxSecretBytes)
	}
	return b, nil
}

// absSecretFiles makes each secret's relative file path in a declaration
// file one from the file's folder, base, as data sources are.
func absSecretFiles(d *market.Declaration, base string) {
	for i, s := range d.Secrets {
		if s.From == "" {
			continue
		}
		if kind, p := s.Source(); kind == market.SecretFromFile && !filepath.IsAbs(p) {
			d.Secrets[i].From = market.SecretFromFile + ":" + filepath.Join(base, p)
		}
	}
}

// jobSecrets adds the --secret flags to a job's declaration and reads the
// values of all its secrets (readSecrets).
func jobSecrets(flags []string, d *market.Declaration) (map[string][]byte, error) {
	given, err := secretFlags(flags)
	if err != nil {
		return nil, err
	}
	if len(given) > 0 {
		addSecrets(d, given)
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("the job is not valid with its --secret:\n%w", err)
		}
	}
	return readSecrets(d)
}

// resumeSecrets reads the values given again to e31 resume: the daemon
// drops a job's once it has ended for good.
func resumeSecrets(flags []string) (map[string][]byte, error) {
	given, err := secretFlags(flags)
	if err != nil || len(given) == 0 {
		return nil, err
	}
	d := market.Declaration{Secrets: given}
	return readSecrets(&d)
}

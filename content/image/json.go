package image

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
)

// jsonStrict decodes one JSON value and refuses trailing data.
func jsonStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// jsonMarshal encodes v without HTML escaping, as the tools that write
// image manifests do, so that a manifest we write reads like theirs.
func jsonMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// normalTag returns a docker tag in full (docker.io/library/busybox:latest
// for busybox), or s itself when it does not parse.
func normalTag(s string) string {
	t, err := name.NewTag(s)
	if err != nil {
		return s
	}
	return t.Name()
}

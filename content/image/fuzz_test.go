package image

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// FuzzParseManifest feeds the decoders that read what a peer's DAG holds
// (Load) and what a registry or archive serves: they must refuse, never
// panic, and what they accept must keep the promises the rest relies on.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:`+
		`0000000000000000000000000000000000000000000000000000000000000000","size":2},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:`+
		`1111111111111111111111111111111111111111111111111111111111111111","size":10}]}`),
		[]byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:2222222222222222222222222222222222222222222222222222222222222222"]},"config":{"Entrypoint":["/bin/sh"]}}`))
	f.Add([]byte(`{"schemaVersion":1}`), []byte(`{}`))
	f.Add([]byte(`{"schemaVersion":2,"config":{"digest":"sha512:00"},"layers":null}`), []byte(`{"rootfs":{"diff_ids":["md5:x"]}}`))
	f.Fuzz(func(t *testing.T, manifest, config []byte) {
		for _, mt := range []types.MediaType{types.OCIManifestSchema1, types.DockerManifestSchema2, types.OCIImageIndex} {
			m, err := parseManifest(manifest, mt)
			if err != nil {
				continue
			}
			if len(m.Layers) > maxLayers || checkDigest(m.Config.Digest) != nil {
				t.Fatalf("accepted a manifest that breaks the bounds: %+v", m)
			}
			for _, l := range m.Layers {
				if checkDigest(l.Digest) != nil || l.Size < 0 || !isLayer(l.MediaType) {
					t.Fatalf("accepted layer %+v", l)
				}
			}
			cf, err := parseConfig(config, len(m.Layers))
			if err != nil {
				continue
			}
			if len(cf.RootFS.DiffIDs) != len(m.Layers) {
				t.Fatalf("%d diff_ids for %d layers", len(cf.RootFS.DiffIDs), len(m.Layers))
			}
		}
	})
}

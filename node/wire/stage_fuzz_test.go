package wire_test

import (
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// FuzzStageMessages feeds the decoders of the staging protocols what a
// hostile peer could send: whatever they accept must parse to values within
// bounds, and nothing may panic.
func FuzzStageMessages(f *testing.F) {
	root := "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
	prov := "12D3KooWHHzSeKaY8xuZVzkLbKFfvNgPPeKhFBGrMbNzbm5akpqu"
	f.Add([]byte(`{"job":"j1","lease":"l1"}`))
	f.Add([]byte(`{"job":""}`))
	f.Add([]byte(`{"sources":[{"root":"` + root + `","providers":["` + prov + `"]}]}`))
	f.Add([]byte(`{"sources":[{"root":"x","providers":["y"]}]}`))
	f.Add([]byte(`{"staging":[{"root":"` + root + `","providers":["` + prov + `"]}]}`))
	f.Add([]byte(`{"root":"` + root + `","to":"` + prov + `"}`))
	f.Add([]byte(`{"root":"","to":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sr wire.StageRequest
		if p2p.DecodeStrict(b, &sr) == nil {
			_ = wire.CheckStage(sr)
		}
		var rep wire.StageReply
		if p2p.DecodeStrict(b, &rep) == nil {
			if m, err := rep.ParsedStaging(); err == nil && len(m) > 64 {
				t.Fatalf("accepted %d staging roots", len(m))
			}
			if m, err := rep.Parsed(); err == nil {
				for c, ps := range m {
					if !c.Defined() || len(ps) > 16 {
						t.Fatalf("accepted root %v with %d providers", c, len(ps))
					}
				}
			}
		}
		var rr wire.RelayRequest
		if p2p.DecodeStrict(b, &rr) == nil {
			if c, p, err := rr.Parsed(); err == nil && (!c.Defined() || p == "") {
				t.Fatalf("accepted %q: root %v, peer %q", b, c, p)
			}
		}
	})
}

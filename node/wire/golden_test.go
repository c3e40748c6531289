package wire

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/ledger/ledgertest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from today's encoding")

// TestBodiesEncodeAsPinned holds the bytes each body puts on the wire: a
// value with every field set encodes exactly as the pinned file, so a
// rename, a moved type or a changed tag cannot change what peers read.
func TestBodiesEncodeAsPinned(t *testing.T) {
	bodies := []any{
		&GangPart{}, &GangLease{}, &SignedGangLease{}, &GangRequest{}, &GangReply{},
		&DeclarationBody{}, &WithdrawalBody{}, &LeaseTerms{}, &SignedLease{}, &ReleaseBody{},
		&LogsRequest{}, &LogsReply{}, &OfferBody{}, &ProposeRequest{}, &ProposeReply{},
		&EventRequest{}, &StepAt{}, &OutputRequest{}, &ReceiptRequest{}, &ReceiptReply{},
		&WithdrawRequest{}, &RequeueBody{}, &AvoidEntry{}, &Avoided{}, &ShardPeersRequest{},
		&ShardPeersReply{}, &ShardPeer{}, &StageRequest{}, &StageReply{}, &RootSources{},
		&RelayRequest{}, &TaskBatchBody{}, &DigestBody{}, &DigestMember{},
	}
	ledgertest.PinnedTypes(t, filepath.Join("testdata", "golden"), bodies, *updateGolden)
}

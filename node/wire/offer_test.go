package wire_test

import (
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// An offer's GPU model reaches e31 nodes and the dashboard: one that would
// write the reader's clipboard (OSC 52), clear the screen or reorder the
// line is kept without what a terminal would obey. A UUID or an address
// names something, so one carrying such text is refused, saying where.
func TestOfferText(t *testing.T) {
	prov := wiretest.FreshParty(t)

	hostile := wiretest.Offer(prov.ID)
	hostile.Offer.GPUs[0].Model = "NVIDIA H200\x1b]52;c;cHduZWQ=\a"
	hostile.Offer.GPUs[1].Model = "\x1b[2J\u202eNVIDIA H200\tPCIe\u009b"
	s := wiretest.OnWire(t, prov, wire.KindOffer, hostile)
	if err := wire.ValidateOffer(s); err != nil {
		t.Fatalf("an offer with escapes in its models refused: %v", err)
	}
	b, err := wire.DecodeOffer(s)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"NVIDIA H200]52;c;cHduZWQ=", "[2JNVIDIA H200 PCIe"} {
		if got := b.Offer.GPUs[i].Model; got != want {
			t.Errorf("gpus[%d].model decoded as %q, want %q", i, got, want)
		}
	}
	if b.Offer.GPUs[0].UUID != hostile.Offer.GPUs[0].UUID || b.Addrs[0] != hostile.Addrs[0] {
		t.Errorf("decoding changed what it had no cause to: %+v", b)
	}

	for _, c := range []struct {
		name string
		edit func(*wire.OfferBody)
		want string
	}{
		{"csi in a uuid", func(b *wire.OfferBody) { b.Offer.GPUs[1].UUID += "\x1b[2J" }, `offer gpus[1].uuid: control character \x1b at byte 40`},
		{"bidi in an address", func(b *wire.OfferBody) { b.Addrs = append(b.Addrs, "/dns4/\u202eexample.com/tcp/1") }, `offer addrs[1]: bidi control \u202e at byte 6`},
		{"newline in an address", func(b *wire.OfferBody) { b.Addrs[0] += "\n" }, `offer addrs[0]: control character \n`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := wiretest.Offer(prov.ID)
			c.edit(&b)
			err := wire.ValidateOffer(wiretest.OnWire(t, prov, wire.KindOffer, b))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ValidateOffer = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// An offer's price is within bounds and its currency a plain name.
func TestOfferPrice(t *testing.T) {
	prov := wiretest.FreshParty(t)
	for _, c := range []struct {
		name     string
		price    int64
		currency string
		ok       bool
	}{
		{"free", 0, "", true},
		{"priced", 2_400_000, "credits", true},
		{"negative", -1, "credits", false},
		{"over the bound", 1_000_000_000_001, "credits", false},
		{"a currency a terminal obeys", 1, "cr\x1b[2J", false},
		{"a currency too long", 1, strings.Repeat("c", wire.MaxCurrency+1), false},
		{"a currency starting with a digit", 1, "1usd", false},
	} {
		b := wiretest.Offer(prov.ID)
		b.Offer.Price, b.Currency = market.Price(c.price), c.currency
		err := wire.ValidateOffer(wiretest.OnWire(t, prov, wire.KindOffer, b))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want accepted %v", c.name, err, c.ok)
		}
	}
}

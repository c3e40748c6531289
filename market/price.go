package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Price is an amount of the network's currency per GPU-hour, in millionths
// of its unit, so that Match compares integers and every peer agrees on
// every comparison: "2.40" is 2,400,000. An offer's price is what an hour
// of one of its GPUs costs (Offer.Price); a job's cap is the most it pays
// (Request.MaxPrice). Zero is free on an offer, and no cap on a job.
type Price int64

// PriceUnit is one unit of the currency.
const PriceUnit Price = 1_000_000

// MaxPrice bounds a price: a million units per GPU-hour.
const MaxPrice = 1_000_000 * PriceUnit

// ErrBadPrice is returned, wrapped, for text that is not a price.
var ErrBadPrice = errors.New("bad price")

// ParsePrice reads a price in units of the currency per GPU-hour, with
// up to six decimals: "2.40", "0.5", "3". Not negative, at most MaxPrice.
func ParsePrice(s string) (Price, error) {
	orig := s
	whole, frac, ok := strings.Cut(s, ".")
	if s == "" || whole == "" && frac == "" || !digits(whole) || ok && (frac == "" || !digits(frac)) {
		return 0, fmt.Errorf("%w %q: want units of the currency per GPU-hour, such as 2.40", ErrBadPrice, orig)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%w %q: at most six decimals", ErrBadPrice, orig)
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > int64(MaxPrice/PriceUnit) {
		return 0, fmt.Errorf("%w %q: at most %s", ErrBadPrice, orig, MaxPrice)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt((frac + "000000")[:6], 10, 64)
	}
	p := Price(w)*PriceUnit + Price(f)
	if p > MaxPrice {
		return 0, fmt.Errorf("%w %q: at most %s", ErrBadPrice, orig, MaxPrice)
	}
	return p, nil
}

// digits reports whether s is ASCII digits only ("" is).
func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// String writes the price in units, with at least two decimals and no
// trailing zeros beyond them: "2.40", "0.125", "3.00".
func (p Price) String() string {
	if p < 0 {
		return "-" + (-p).String()
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", int64(p%PriceUnit)), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%d.%s", int64(p/PriceUnit), frac)
}

// Check reports a price out of bounds.
func (p Price) Check() error {
	if p < 0 || p > MaxPrice {
		return fmt.Errorf("%w %d: want 0 to %s per GPU-hour", ErrBadPrice, int64(p), MaxPrice)
	}
	return nil
}

// MarshalJSON writes the price as a string such as "2.40".
func (p Price) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }

// UnmarshalJSON reads a string such as "2.40" or a plain JSON number of
// units.
func (p *Price) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("%w: want a string such as \"2.40\" or a number", ErrBadPrice)
		}
		s = n.String()
	}
	v, err := ParsePrice(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalYAML writes the price as a string such as 2.40.
func (p Price) MarshalYAML() (any, error) { return p.String(), nil }

// UnmarshalYAML reads a scalar such as 2.40.
func (p *Price) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: want a scalar such as 2.40", ErrBadPrice)
	}
	v, err := ParsePrice(n.Value)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// PriceList is a provider's prices per GPU-hour by GPU model
// (ModelMatches), with a default for models it does not name ("default",
// or "" for none).
type PriceList map[string]Price

// ParsePriceList reads "H100=2.40,A100=1.20,default=0.80" (e31d --price).
func ParsePriceList(s string) (PriceList, error) {
	out := PriceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		model, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || model == "" {
			return nil, fmt.Errorf("%w %q: want MODEL=PRICE, such as H100=2.40 or default=1.00", ErrBadPrice, kv)
		}
		p, err := ParsePrice(v)
		if err != nil {
			return nil, fmt.Errorf("price of %s: %w", model, err)
		}
		if _, dup := out[model]; dup {
			return nil, fmt.Errorf("%w: %s priced twice", ErrBadPrice, model)
		}
		out[model] = p
	}
	return out, nil
}

// For is the price of a box with gpus: the highest of its models' prices
// (a mixed box is priced at its dearest GPU, so that no job pays less than
// the GPU it gets asks), each model priced by the first name in the list,
// in sorted order, that it matches, else by "default"; 0 without a price.
func (l PriceList) For(gpus []GPU) Price {
	names := make([]string, 0, len(l))
	for k := range l {
		if k != "default" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out Price
	for _, g := range gpus {
		p, found := l["default"], false
		for _, k := range names {
			if !found && ModelMatches(g.Model, k) {
				p, found = l[k], true
			}
		}
		out = max(out, p)
	}
	return out
}

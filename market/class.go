package market

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Class is a resource class: what kind of box a provider offers, derived
// alike on every peer from the GPUs its offer lists, so that a large
// network's market can be split by what is offered rather than by who
// offers it. A job is declared in a class that fits its request, and the
// boxes it could run on are all in that class's market.
//
//   - "cpu": no GPUs.
//   - "consumer-24G": consumer cards (GeForce, RTX, GTX, Radeon, Arc),
//     named by the smallest card's memory, rounded up to 8, 12, 16, 24, 32
//     or 48 GiB: such boxes hold one or two cards, and a job asks for
//     memory rather than a model.
//   - "H100x8", "H100x1-4", "A100x5-7", "H200x9+": the model family (the
//     most common family in the box, ties to the first by name) and the
//     box size, 1-4, 5-7, 8 or 9+ GPUs.
//
// A class name is at most MaxClassLen bytes of letters, digits and "-+",
// so that it can name a topic.
type Class string

// ClassCPU is the class of a provider with no GPUs.
const ClassCPU Class = "cpu"

// MaxClassLen bounds a class name.
const MaxClassLen = 32

// ClassOf is the class of a box with gpus.
func ClassOf(gpus []GPU) Class {
	if len(gpus) == 0 {
		return ClassCPU
	}
	minMem := gpus[0].MemoryBytes
	allConsumer := true
	count := map[string]int{}
	for _, g := range gpus {
		minMem = min(minMem, g.MemoryBytes)
		if !consumerModel(g.Model) {
			allConsumer = false
		}
		count[ModelFamily(g.Model)]++
	}
	if allConsumer {
		return Class("consumer-" + strconv.Itoa(consumerMemGiB(minMem)) + "G")
	}
	families := make([]string, 0, len(count))
	for f := range count {
		families = append(families, f)
	}
	slices.Sort(families)
	best := families[0]
	for _, f := range families[1:] {
		if count[f] > count[best] {
			best = f
		}
	}
	return Class(best + "x" + boxSize(len(gpus)))
}

// boxSize names a box of n GPUs' size band.
func boxSize(n int) string {
	switch {
	case n <= 4:
		return "1-4"
	case n <= 7:
		return "5-7"
	case n == 8:
		return "8"
	}
	return "9+"
}

// boxBand is the most and fewest GPUs a box of a size band holds.
func boxBand(band string) (lo, hi int, ok bool) {
	switch band {
	case "1-4":
		return 1, 4, true
	case "5-7":
		return 5, 7, true
	case "8":
		return 8, 8, true
	case "9+":
		return 9, MaxGPUsPerBox, true
	}
	return 0, 0, false
}

// MaxGPUsPerBox is the most GPUs a class's box is taken to hold (the "9+"
// band's bound): no offer lists more (wire.MaxOfferGPUs is smaller).
const MaxGPUsPerBox = 64

// consumerSteps are the memory sizes, in GiB, that name a consumer class.
var consumerSteps = []int{8, 12, 16, 24, 32, 48}

// consumerMemGiB rounds a card's memory up to a consumer step: 24 GiB for
// a 24 GiB card reported as 23.99 GiB usable, say.
func consumerMemGiB(b uint64) int {
	gib := int((b + (1<<30)/2) >> 30) // to the nearest GiB
	for _, s := range consumerSteps {
		if gib <= s {
			return s
		}
	}
	return consumerSteps[len(consumerSteps)-1]
}

// consumerModel reports whether a model name is a consumer card's.
func consumerModel(model string) bool {
	words := strings.FieldsFunc(strings.ToUpper(model), notAlnum)
	for i, w := range words {
		switch {
		case w == "GEFORCE" || w == "GTX" || w == "RADEON" || w == "ARC" || w == "TITAN":
			return true
		case strings.HasPrefix(w, "GTX") && isDigits(w[3:]):
			return true
		case strings.HasPrefix(w, "RTX") && isDigits(w[3:]):
			return true // RTX4090, as a simulated card is named
		case w == "RTX":
			// "RTX A6000" and "RTX 6000 Ada" are workstation cards.
			return i+1 < len(words) && isDigits(words[i+1]) && !slices.Contains(words, "ADA")
		}
	}
	return false
}

func notAlnum(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }

// ModelFamily is the family a model name belongs to: its first word that
// mixes letters and digits ("NVIDIA H100 80GB HBM3" is H100, "Tesla
// V100-SXM2-32GB" is V100, "AMD Instinct MI300X" MI300X), leaving out
// memory sizes ("80GB"); else its first word; "GPU" for an empty name.
// Upper case, at most 16 bytes.
func ModelFamily(model string) string {
	words := strings.FieldsFunc(strings.ToUpper(model), notAlnum)
	for _, w := range words {
		if w == "NVIDIA" || w == "AMD" || w == "INTEL" || strings.HasSuffix(w, "GB") && isDigits(strings.TrimSuffix(w, "GB")) {
			continue
		}
		if hasLetter(w) && hasDigit(w) {
			return w[:min(len(w), 16)]
		}
	}
	for _, w := range words {
		if w != "NVIDIA" && w != "AMD" && w != "INTEL" {
			return w[:min(len(w), 16)]
		}
	}
	return "GPU"
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func hasLetter(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
}
func hasDigit(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
}

// ParseClass checks a class name as a peer sends it: the grammar ClassOf
// writes.
func ParseClass(s string) (Class, error) {
	c := Class(s)
	if _, _, _, err := c.parts(); err != nil {
		return "", err
	}
	return c, nil
}

// parts splits a class: its family ("" for cpu and consumer classes), the
// fewest and most GPUs of its boxes, and for a consumer class its cards'
// memory in GiB.
func (c Class) parts() (family string, box [2]int, memGiB int, err error) {
	s := string(c)
	switch {
	case len(s) == 0 || len(s) > MaxClassLen:
		return "", box, 0, fmt.Errorf("class %q: want 1 to %d bytes", s, MaxClassLen)
	case c == ClassCPU:
		return "", box, 0, nil
	}
	if rest, ok := strings.CutPrefix(s, "consumer-"); ok {
		g, found := strings.CutSuffix(rest, "G")
		n, err := strconv.Atoi(g)
		if !found || err != nil || !slices.Contains(consumerSteps, n) || strconv.Itoa(n) != g {
			return "", box, 0, fmt.Errorf("class %q: a consumer class is consumer-NG, N one of %v", s, consumerSteps)
		}
		return "", [2]int{1, MaxGPUsPerBox}, n, nil
	}
	i := strings.LastIndexByte(s, 'x')
	if i <= 0 {
		return "", box, 0, fmt.Errorf("class %q: want cpu, consumer-NG or FAMILYxSIZE (H100x8)", s)
	}
	family = s[:i]
	lo, hi, ok := boxBand(s[i+1:])
	if !ok {
		return "", box, 0, fmt.Errorf("class %q: box size %q is not one of 1-4, 5-7, 8, 9+", s, s[i+1:])
	}
	if len(family) > 16 || strings.ContainsFunc(family, func(r rune) bool { return notAlnum(r) }) {
		return "", box, 0, fmt.Errorf("class %q: family %q is not an upper-case model family", s, family)
	}
	return family, [2]int{lo, hi}, 0, nil
}

// Fits reports whether a box of class c may host one node of a job asking
// for r: a CPU job fits any class; a GPU job fits a class whose boxes can
// hold its GPUs, of the model it names (by family, as Match matches it, a
// whole word of either name) and with the memory it asks. It is a bound:
// Match, in the class's market, decides. A malformed class fits nothing.
func (c Class) Fits(r Request) bool {
	family, box, memGiB, err := c.parts()
	if err != nil {
		return false
	}
	if r.GPUs == 0 {
		return true
	}
	switch {
	case c == ClassCPU:
		return false
	case r.GPUs > box[1]:
		return false
	case memGiB > 0:
		if r.GPUModel != "" && !consumerModel(r.GPUModel) {
			return false
		}
		return uint64(r.GPUMemory) <= uint64(memGiB)<<30
	case r.GPUModel != "":
		return ModelMatches(family, ModelFamily(r.GPUModel)) || ModelMatches(r.GPUModel, family)
	}
	return true
}

// Family is the model family of a GPU class, "" for cpu and consumer
// classes.
func (c Class) Family() string {
	f, _, _, _ := c.parts()
	return f
}

// MaxBoxGPUs is the most GPUs a box of class c holds; 0 for cpu and for a
// malformed class.
func (c Class) MaxBoxGPUs() int {
	_, box, _, err := c.parts()
	if err != nil {
		return 0
	}
	return box[1]
}

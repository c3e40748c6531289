package market

import "strings"

// suggestField is the end of an unknown field's error: the known field of
// the same section it is a likely typo of, or the section where a field of
// that name belongs; "" when neither.
func suggestField(field string, known []string) string {
	parent, key := "", field
	if i := strings.LastIndex(field, "."); i >= 0 {
		parent, key = field[:i], field[i+1:]
	}
	if near := nearest(strings.ToLower(key), known); near != "" {
		return "; did you mean " + near + "?"
	}
	if home := sectionOf(key); home != "" && home != stripIndex(parent) {
		return "; " + key + " goes under " + home
	}
	return ""
}

// sectionOf is the section of a declaration that holds a field of this
// name, "" for the top level or none.
func sectionOf(key string) string {
	switch key {
	case "image", "command", "env", "workdir":
		return "work"
	case "source", "mount":
		return "data[]"
	case "gpus", "gpu_model", "gpu_memory", "cpus", "memory", "disk", "limit", "locality", "locality_wait", "retries":
		return "request"
	case "path", "checkpoints":
		return "output"
	case "every", "resume", "max_resumes":
		return "output.checkpoints"
	}
	return ""
}

// stripIndex drops list indices from a field path: data[2] is data[].
func stripIndex(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 {
		return field[:i] + "[]"
	}
	return field
}

// Nearest is the one word of known within a small edit distance of s, as
// nearest below: the suggestion for a name a user typed, for decoders of
// other names than a declaration's fields (e31d's config keys).
func Nearest(s string, known []string) string { return nearest(s, known) }

// nearest is the one word of known within a small edit distance of s
// (a third of its length, at least 1, at most 3), "" when there is none
// or two are equally near.
func nearest(s string, known []string) string {
	limit := min(max(len(s)/3, 1), 3)
	best, bestD, tie := "", limit+1, false
	for _, k := range known {
		d := editDistance(s, k)
		switch {
		case d < bestD:
			best, bestD, tie = k, d, false
		case d == bestD:
			tie = true
		}
	}
	if bestD > limit || tie {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, over bytes (field
// names are ASCII); long inputs are not compared.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 10
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

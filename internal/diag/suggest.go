package diag

import (
	"strings"
	"unicode/utf8"
)

// Distance is the Levenshtein edit distance between two strings, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// maxSuggested is the longest name, in bytes, that Closest looks for: the
// distance costs the product of the two lengths, and two names of 50 MB
// would take days.
const maxSuggested = 256

// Closest returns the candidate nearest to name, ignoring case, or "" when
// none is within a plausible typo (a third of the name, at least two
// edits). Ties go to the alphabetically first candidate. Names longer than
// maxSuggested bytes get no suggestion.
func Closest(name string, cands []string) string {
	best, bestD := "", max(2, len(name)/3)+1
	if len(name) > maxSuggested {
		return ""
	}
	runes := utf8.RuneCountInString(name)
	for _, c := range cands {
		if len(c) > maxSuggested || abs(utf8.RuneCountInString(c)-runes) > bestD {
			continue // the distance is at least the difference in length
		}
		d := Distance(strings.ToLower(name), strings.ToLower(c))
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

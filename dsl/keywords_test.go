package dsl

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLiteralGroups: the groups of literal words of a participle tag, a
// synonym group as one.
func TestLiteralGroups(t *testing.T) {
	for _, c := range []struct {
		tag  string
		want []words
	}{
		{"'listen' @@", []words{{"listen"}}},
		{"(  ( 'listen' | 'accept' ) @@", []words{{"listen", "accept"}}},
		{"@('node' | 'boolean' | 'and')", []words{{"node", "boolean", "and"}}},
		{"( '[' 'predicate' @@ ']' )*", []words{{"["}, {"predicate"}, {"]"}}},
		{"( 'mtu' @@ )? '}'", []words{{"mtu"}, {"}"}}},
		{" | @~('{' | '}' | '(' | ')') )", []words{{"{", "}", "(", ")"}}},
		{"@(Ident | Ref)", nil},
	} {
		if got := literalGroups(c.tag); !cmp.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.tag, got, c.want)
		}
	}
}

// TestKeywordsFromGrammar: every keyword the hand parser and the
// formatter use is a word of the grammar participle builds.
func TestKeywordsFromGrammar(t *testing.T) {
	k := keywords
	ebnf := Grammar()
	for _, ws := range []words{k.graph, k.stack, k.decls, k.nodeItems, k.items, k.containers, k.spawnPredicate,
		k.enum, k.mac, k.ip, k.mtu, k.listen, k.flow, k.flag} {
		if len(ws) == 0 {
			t.Fatal("an empty keyword group")
		}
		for _, w := range ws {
			if !strings.Contains(ebnf, strconv.Quote(w)) {
				t.Errorf("keyword %q is not in the grammar", w)
			}
		}
	}
	if !cmp.Equal(k.nodeKinds, words{"node", "boolean", "and", "or", "nand", "nor", "config"}) {
		t.Errorf("node kinds %q", k.nodeKinds)
	}
}

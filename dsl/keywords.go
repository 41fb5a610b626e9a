package dsl

import (
	"fmt"
	"reflect"
	"strings"
)

// The keywords of the language are written once, in the struct tags of
// ast.go. The generated parser (parse_gen.go) is made from the tags; the
// formatter and syntax recovery read the keywords from them: keywords is
// filled once, at init, and a tag that does not say what they expect
// stops the program at start-up (every test run starts it). A synonym is
// one edit of a tag: `'listen'` becoming `( 'listen' | 'accept' )` makes
// both parsers take either word (go test ./dsl -update regenerates
// parse_gen.go and testdata/grammar.ebnf), and fmt writes the first.

// words is a keyword and its synonyms, the first the canonical spelling
// (the formatter's).
type words []string

func (w words) has(v string) bool {
	for _, s := range w {
		if s == v {
			return true
		}
	}
	return false
}

// keywords are the words of the grammar, by where they stand.
var keywords = struct {
	graph, stack                                           words
	helpers, cluster, nodeKinds, resourceKinds             words
	impl, attr, spawn, port, constraint, semantics         words
	predicate, spawnPredicate, typ, function, cost, config words
	enum                                                   words
	iface, cores, endpoint, service                        words
	mac, ip, mtu, listen, flow, flag                       words
	// decls begin a declaration of a graph or cluster; items one of a
	// stack; containers are the blocks that hold declarations.
	decls, nodeItems, items, containers words
}{}

func init() {
	k := &keywords
	k.graph = tagWords(Graph{}, "Name", 0)
	k.stack = tagWords(Stack{}, "Name", 0)
	k.helpers = tagWords(Decl{}, "Helpers", 0)
	k.cluster = tagWords(Cluster{}, "Name", 0)
	k.nodeKinds = tagWords(Node{}, "Kind", 0)
	k.resourceKinds = tagWords(Resource{}, "Kind", 0)
	k.impl = tagWords(Item{}, "Impl", 0)
	k.attr = tagWords(Item{}, "Attr", 0)
	k.spawn = tagWords(Spawn{}, "Name", 0)
	k.spawnPredicate = tagWords(Spawn{}, "Preds", 1)
	k.port = tagWords(Port{}, "Names", 0)
	k.constraint = tagWords(Constraint{}, "Port", 0)
	k.semantics = tagWords(Semantics{}, "Ports", 0)
	k.predicate = tagWords(Predicate{}, "Port", 0)
	k.typ = tagWords(Item{}, "Type", 0)
	k.function = tagWords(Item{}, "Function", 0)
	k.cost = tagWords(Cost{}, "Unit", 0)
	k.config = tagWords(ConfigSpec{}, "Kind", 0)
	k.enum = tagWords(ConfType{}, "Enum", 0)
	k.iface = tagWords(Interface{}, "Name", 0)
	k.cores = tagWords(StackItem{}, "Cores", 0)
	k.endpoint = tagWords(Endpoint{}, "Name", 0)
	k.service = tagWords(Service{}, "Name", 0)
	k.mac = tagWords(Interface{}, "MAC", 0)
	k.ip = tagWords(Interface{}, "IPs", 0)
	k.mtu = tagWords(Interface{}, "MTU", 0)
	k.listen = tagWords(Endpoint{}, "Listen", 0)
	k.flow = tagWords(Endpoint{}, "Flow", 0)
	k.flag = tagWords(Flag{}, "Text", 0)
	k.decls = concat(k.helpers, k.cluster, k.nodeKinds, k.resourceKinds)
	k.nodeItems = concat(k.impl, k.attr, k.spawn, k.port, k.constraint, k.semantics, k.predicate, k.typ, k.function, k.cost, k.config)
	k.items = concat(k.iface, k.cores, k.endpoint, k.service)
	k.containers = concat(k.graph, k.cluster, k.stack)
}

func concat(ws ...words) words {
	var out words
	for _, w := range ws {
		out = append(out, w...)
	}
	return out
}

// tagWords returns the n-th group of literal words in the participle tag
// of a field of a grammar struct: a quoted word ('port'), or quoted
// words separated by | in parentheses (('node' | 'boolean')). Quoted
// punctuation counts as a group too ('[' 'predicate' has the groups [
// and predicate). It panics when the tag has no such group.
func tagWords(v any, field string, n int) words {
	t := reflect.TypeOf(v)
	f, ok := t.FieldByName(field)
	if !ok {
		panic(fmt.Sprintf("dragonc: internal error: grammar struct %s has no field %s", t.Name(), field))
	}
	groups := literalGroups(f.Tag.Get("parser"))
	if n >= len(groups) {
		panic(fmt.Sprintf("dragonc: internal error: the tag of %s.%s has no keyword %d: %q", t.Name(), field, n, f.Tag.Get("parser")))
	}
	return groups[n]
}

// literalGroups splits a participle tag into its groups of literals, in
// order. A parenthesised group counts as one when it holds only literals
// and |; any other parenthesis is skipped over.
func literalGroups(tag string) []words {
	var out []words
	toks := tagTokens(tag)
	for i := 0; i < len(toks); i++ {
		switch {
		case isQuoted(toks[i]):
			out = append(out, words{unquoteTag(toks[i])})
		case toks[i] == "(":
			var alts words
			j := i + 1
			for ; j < len(toks) && (isQuoted(toks[j]) || toks[j] == "|"); j++ {
				if isQuoted(toks[j]) {
					alts = append(alts, unquoteTag(toks[j]))
				}
			}
			if j < len(toks) && toks[j] == ")" && len(alts) > 0 {
				out = append(out, alts)
				i = j
			}
		}
	}
	return out
}

func isQuoted(s string) bool { return len(s) >= 2 && s[0] == '\'' }

func unquoteTag(s string) string { return s[1 : len(s)-1] }

// tagTokens splits a tag into quoted literals and single characters,
// dropping spaces; a literal holds no quote in this grammar.
func tagTokens(tag string) []string {
	var out []string
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		switch {
		case c == ' ':
		case c == '\'':
			j := strings.IndexByte(tag[i+1:], '\'')
			if j < 0 {
				panic("dragonc: internal error: unclosed literal in grammar tag " + tag)
			}
			out = append(out, tag[i:i+j+2])
			i += j + 1
		default:
			out = append(out, string(c))
		}
	}
	return out
}

// FileKind is a kind of file the language is written in, by extension.
type FileKind struct {
	Ext   string // without the dot
	Model bool   // it may hold a NIC model (graph NAME { ... })
	Stack bool   // it may hold a stack (stack NAME { ... }) or an explicit LPG
}

// FileKinds are the extensions of dragonc files (docs/language.md's table):
// the commands and shell completion read them from here.
var FileKinds = []FileKind{
	{Ext: "prg", Model: true},
	{Ext: "unicorn", Model: true},
	{Ext: "lpg", Stack: true},
}

// Extensions returns the extensions of the kinds keep accepts, in
// FileKinds' order.
func Extensions(keep func(FileKind) bool) []string {
	var out []string
	for _, k := range FileKinds {
		if keep(k) {
			out = append(out, k.Ext)
		}
	}
	return out
}

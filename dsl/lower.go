package dsl

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// Reserved are the words that Unicorn reserves; none may name a node,
// cluster or port.
var Reserved = []string{"graph", "cluster", "node", "config", "boolean", "and",
	"nand", "or", "nor", "gconfig", "port", "attr", "type", "semantics",
	"helpers", "spawn", "predicate", "constraint", "implementation", "function"}

// Lower resolves names in a parsed graph file, validates it, and builds
// the graph. It returns the graph (nil only when the file holds no graph)
// and every diagnostic, sorted.
func Lower(s *Source) (*graph.Graph, diag.List) {
	if s == nil || s.AST == nil || s.AST.Graph == nil {
		return nil, nil
	}
	l := &lowerer{src: s, g: graph.New(s.AST.Graph.Name.Text)}
	l.checkName(s.AST.Graph.Name, "graph")
	l.declare(s.AST.Graph.Decls, nil)
	l.connect()
	l.checkAtoms()
	l.checkCycles()
	l.checkReachable()
	l.diags.Sort()
	return l.g, l.diags
}

// Load parses, lowers and validates a graph file in one step.
func Load(name string, src []byte) (*graph.Graph, *Source, diag.List) {
	s, diags := Parse(name, src)
	if diags.HasErrors() || s.AST.Graph == nil {
		return nil, s, diags
	}
	g, more := Lower(s)
	diags = append(diags, more...)
	diags.Sort()
	return g, s, diags
}

type lowerer struct {
	src   *Source
	g     *graph.Graph
	diags diag.List
	decls []*nodeDecl // parallel to g.Nodes
	preds []parsedPred
	// expanded counts the names numbered ranges produced; tooMany is set
	// once the file's limit was reported.
	expanded int
	tooMany  bool
	// suggested counts the did-you-mean suggestions computed; names are
	// the node names they are chosen from.
	suggested int
	names     []string
}

// maxSuggestions bounds the did-you-mean suggestions of one file.
const maxSuggestions = 20

// parsedPred is a predicate string and what it parsed to, kept for the
// checks that need every node declared.
type parsedPred struct {
	s *Str
	e pred.Expr
}

// nodeDecl keeps the syntax of a node for the second pass.
type nodeDecl struct {
	ast  *Node
	path []string // cluster path, outermost first
}

func (l *lowerer) at(id *Ident) diag.Range { return l.src.rng(id.Pos, id.EndPos) }

func (l *lowerer) atPos(start, end lexer.Position) diag.Range { return l.src.rng(start, end) }

// checkName rejects reserved words and names that are not Unicorn
// identifiers.
func (l *lowerer) checkName(id *Ident, what string) {
	name := id.Text
	if slices.Contains(Reserved, name) {
		l.diags.Errorf(l.at(id), diag.CodeReserved, "%q is a reserved word and cannot name a %s", name, what)
		return
	}
	if strings.ContainsAny(name, ".-") {
		l.diags.Errorf(l.at(id), diag.CodeBadName, "%q is not a valid %s name", name, what).Detail =
			"names are a letter or _ followed by letters, digits or _"
	}
}

// resolve turns a reference written inside cluster path into a full name.
// Each leading dot moves one cluster up.
func (l *lowerer) resolve(id *Ident, path []string) (string, bool) {
	text := id.Text
	dots := len(text) - len(strings.TrimLeft(text, "."))
	if dots > len(path) {
		d := l.diags.Errorf(l.at(id), diag.CodeTooManyDots, "reference %q goes %d cluster(s) up, but it is only %d deep", text, dots, len(path))
		d.Detail = "each leading dot leaves one enclosing cluster"
		return "", false
	}
	return strings.Join(path[:len(path)-dots], "") + text[dots:], true
}

func (l *lowerer) declare(decls []*Decl, path []string) {
	for _, d := range decls {
		switch {
		case d.Helpers != nil:
			if len(path) > 0 {
				l.diags.Errorf(l.atPos(d.Pos, d.EndPos), diag.CodeSyntax, "helpers belong at graph level, not inside a cluster")
			}
			if l.g.Helpers != "" {
				l.diags.Errorf(l.atPos(d.Pos, d.EndPos), diag.CodeRepeated, "a graph has at most one helpers block")
			}
			l.g.Helpers = l.smtText(d.Helpers)
		case d.Cluster != nil:
			l.checkName(d.Cluster.Name, "cluster")
			l.declare(d.Cluster.Decls, append(slices.Clone(path), d.Cluster.Name.Text))
		case d.Node != nil:
			l.declareNode(d.Node, path)
		case d.Resource != nil:
			l.declareResource(d.Resource, path)
		}
	}
}

func (l *lowerer) declareResource(r *Resource, path []string) {
	l.checkName(r.Name, r.Kind)
	res := &graph.Resource{Kind: r.Kind, Name: strings.Join(path, "") + r.Name.Text, Src: l.srcOf(r.Name.Pos)}
	res.Props = l.props(r.Props)
	for _, other := range l.g.Resources {
		if other.Kind == res.Kind && other.Name == res.Name {
			l.diags.Errorf(l.at(r.Name), diag.CodeRepeated, "%s %q is declared twice", r.Kind, res.Name)
		}
	}
	l.g.Resources = append(l.g.Resources, res)
}

func (l *lowerer) srcOf(p lexer.Position) graph.Source {
	return graph.Source{File: l.src.File.Name, Offset: p.Offset}
}

// expandRange turns `Name0..N` into the names Name0 .. NameN. It reports
// a malformed range and returns nil.
func (l *lowerer) expandRange(id *Ident, hi *Num) []string {
	if hi == nil {
		return []string{id.Text}
	}
	text := id.Text
	i := len(text)
	for i > 0 && text[i-1] >= '0' && text[i-1] <= '9' {
		i--
	}
	lo, err1 := strconv.Atoi(text[i:])
	top, err2 := strconv.Atoi(hi.Text)
	switch {
	case i == len(text) || err1 != nil:
		l.diags.Errorf(l.at(id), diag.CodeBadRange, "a numbered range must start with a name ending in digits, as in Queue0..15")
		return nil
	case err2 != nil || hi.Neg || strings.Contains(hi.Text, "."):
		l.diags.Errorf(l.atPos(hi.Pos, hi.EndPos), diag.CodeBadRange, "the end of a numbered range must be a whole number")
		return nil
	case top < lo:
		l.diags.Errorf(l.atPos(hi.Pos, hi.EndPos), diag.CodeBadRange, "numbered range %s..%d ends below its start", text, top)
		return nil
	case top-lo >= maxRange:
		l.diags.Errorf(l.atPos(hi.Pos, hi.EndPos), diag.CodeBadRange, "numbered range %s..%d has more than %d names", text, top, maxRange)
		return nil
	case l.expanded+top-lo+1 > maxFileRange:
		if !l.tooMany {
			l.tooMany = true
			l.diags.Errorf(l.atPos(hi.Pos, hi.EndPos), diag.CodeBadRange, "numbered ranges in this file name more than %d nodes in all", maxFileRange).Detail =
				"each name is a node or an edge held in memory; split the model or use fewer queues"
		}
		return nil
	}
	l.expanded += top - lo + 1
	out := make([]string, 0, top-lo+1)
	for k := lo; k <= top; k++ {
		out = append(out, text[:i]+strconv.Itoa(k))
	}
	return out
}

// maxRange bounds one numbered range, and maxFileRange all of a file's
// together (declarations and references), so a typo or a hostile file
// cannot declare millions of nodes.
const (
	maxRange     = 65536
	maxFileRange = 1 << 18
)

func (l *lowerer) declareNode(n *Node, path []string) {
	if n.Hi == nil {
		l.declareOne(n, n.Name, path)
		return
	}
	for _, name := range l.expandRange(n.Name, n.Hi) {
		l.declareOne(n, &Ident{Pos: n.Name.Pos, Text: name, EndPos: n.Name.EndPos}, path)
	}
}

func (l *lowerer) declareOne(n *Node, nameID *Ident, path []string) {
	kind, _ := graph.KindFromKeyword(n.Kind)
	full, ok := l.resolve(nameID, path)
	if !ok {
		full = strings.Join(path, "") + strings.TrimLeft(nameID.Text, ".")
	}
	local := strings.TrimLeft(nameID.Text, ".")
	l.checkName(&Ident{Pos: nameID.Pos, Text: local, EndPos: nameID.EndPos}, n.Kind)
	dots := len(nameID.Text) - len(local)
	cluster := slices.Clone(path[:max(0, len(path)-dots)])
	node := &graph.Node{Name: full, Cluster: cluster, Kind: kind, Src: l.srcOf(n.Name.Pos)}
	if first, dup := l.g.Lookup(full); dup {
		line, _ := l.src.File.Position(first.Src.Offset)
		d := l.diags.Warnf(l.at(nameID), diag.CodeDupNode, "node %q is declared twice", full)
		d.Detail = fmt.Sprintf("references bind to the first declaration, on line %d", line)
	}
	l.g.Add(node)
	l.decls = append(l.decls, &nodeDecl{ast: n, path: path})
}

// connect is the second pass: items that refer to other nodes or ports.
func (l *lowerer) connect() {
	for i, nd := range l.decls {
		l.lowerItems(l.g.Nodes[i], nd)
	}
}

func (l *lowerer) lowerItems(node *graph.Node, nd *nodeDecl) {
	n := nd.ast
	seen := map[string]*Item{}
	once := func(it *Item, what string) bool {
		if prev, dup := seen[what]; dup {
			line, _ := l.src.File.Position(prev.Pos.Offset)
			l.diags.Errorf(l.atPos(it.Pos, it.EndPos), diag.CodeRepeated, "%s is given twice in node %q", what, node.Name).Detail =
				fmt.Sprintf("the first is on line %d", line)
			return false
		}
		seen[what] = it
		return true
	}
	type portRef struct {
		id   *Ident
		what string
	}
	var portRefs []portRef
	gate := node.Kind.IsGate()
	// Ports by name: a node may have many (a demultiplexer), and every
	// port reference looks one up.
	ports := map[string]*graph.Port{}
	port := func(name string) *graph.Port { return ports[name] }
	for _, it := range n.Items {
		switch {
		case it.Impl != nil:
			l.notOnGate(gate, it, "implementation", node)
			if once(it, "implementation") {
				node.Impl = it.Impl.Text
			}
		case it.Attr != nil:
			node.Attrs = append(node.Attrs, l.unquote(it.Attr))
		case it.Spawn != nil:
			l.notOnGate(gate, it, "spawn", node)
			sp := it.Spawn
			target, ok := l.ref(sp.Target, nd.path)
			if !ok {
				continue
			}
			s := &graph.Spawn{Name: sp.Name.Text, Target: target}
			for _, p := range sp.Preds {
				if e := l.predicate(p); e != nil {
					s.Preds = append(s.Preds, e)
				}
			}
			node.Spawns = append(node.Spawns, s)
		case it.Port != nil:
			var targets []int
			for _, t := range it.Port.Targets {
				for _, name := range l.expandRange(t.Ref, t.Hi) {
					if id, ok := l.ref(&Ident{Pos: t.Ref.Pos, Text: name, EndPos: t.Ref.EndPos}, nd.path); ok {
						targets = append(targets, id)
					}
				}
			}
			for _, name := range it.Port.Names {
				l.checkName(name, "port")
				if port(name.Text) != nil {
					l.diags.Errorf(l.at(name), diag.CodeDupPort, "port %q is declared twice in node %q", name.Text, node.Name)
					continue
				}
				p := &graph.Port{Name: name.Text, Succ: slices.Clone(targets)}
				node.Ports = append(node.Ports, p)
				ports[p.Name] = p
			}
		case it.Constraint != nil:
			l.notOnGate(gate, it, "constraint", node)
			portRefs = append(portRefs, portRef{it.Constraint.Port, "constraint"})
			node.Constraints = append(node.Constraints, graph.Constraint{Port: it.Constraint.Port.Text, Text: l.unquote(it.Constraint.Text)})
		case it.Semantics != nil:
			l.notOnGate(gate, it, "semantics", node)
			for _, p := range it.Semantics.Ports {
				portRefs = append(portRefs, portRef{p, "semantics"})
			}
		case it.Predicate != nil:
			portRefs = append(portRefs, portRef{it.Predicate.Port, "predicate"})
		case it.Type != nil:
			if l.configOnly(node, it, "type") && once(it, "type") {
				node.ConfType = l.confType(it.Type)
			}
		case it.Function != nil:
			if l.configOnly(node, it, "function") && once(it, "function") {
				node.ConfFunc = it.Function.Text
			}
		case it.Config != nil:
			if l.configOnly(node, it, it.Config.Kind) && once(it, "a configuration kind") {
				node.ConfSpec = &graph.Spec{Kind: it.Config.Kind, Props: l.props(it.Config.Props)}
			}
		case it.Cost != nil:
			v, ok := l.number(it.Cost.Value, false)
			if ok {
				node.Costs = append(node.Costs, graph.Cost{Unit: it.Cost.Unit.Text, Value: v})
			}
		}
	}
	// Port-level items refer to ports declared anywhere in the body.
	for _, pr := range portRefs {
		if port(pr.id.Text) == nil {
			l.diags.Errorf(l.at(pr.id), diag.CodeUnknownPort, "%s names port %q, which node %q does not have", pr.what, pr.id.Text, node.Name).Detail =
				l.portSuggestion(node, pr.id.Text)
		}
	}
	for _, it := range n.Items {
		switch {
		case it.Semantics != nil:
			text := l.smtText(it.Semantics.Body)
			for _, p := range it.Semantics.Ports {
				if port := port(p.Text); port != nil {
					port.Semantics = text
				}
			}
		case it.Predicate != nil:
			if port := port(it.Predicate.Port.Text); port != nil {
				if port.Pred != nil {
					l.diags.Errorf(l.at(it.Predicate.Port), diag.CodeRepeated, "port %q of node %q has two predicates", port.Name, node.Name)
				}
				port.Pred = l.predicate(it.Predicate.Expr)
			}
		}
	}
	l.checkPorts(node, n)
	if node.Kind == graph.Config && node.ConfType == nil {
		// A config node without a type chooses one of its ports.
		t := &graph.ConfType{Kind: graph.EnumType}
		for _, p := range node.Ports {
			t.Enum = append(t.Enum, p.Name)
		}
		node.ConfType = t
	}
}

func (l *lowerer) portSuggestion(node *graph.Node, name string) string {
	var names []string
	for _, p := range node.Ports {
		names = append(names, p.Name)
	}
	if s := diag.Closest(name, names); s != "" {
		return diag.Sprintf("did you mean %q?", s)
	}
	if len(names) == 0 {
		return "the node declares no ports"
	}
	return "its ports are " + diag.Names(names).String()
}

func (l *lowerer) notOnGate(gate bool, it *Item, what string, node *graph.Node) {
	if gate {
		l.diags.Errorf(l.atPos(it.Pos, it.EndPos), diag.CodeGateBody, "%s node %q cannot have %s", node.Kind, node.Name, what).Detail =
			"gate bodies hold only attr and port (and cost, predicate)"
	}
}

func (l *lowerer) configOnly(node *graph.Node, it *Item, what string) bool {
	if node.Kind != graph.Config {
		l.diags.Errorf(l.atPos(it.Pos, it.EndPos), diag.CodeConfigOnly, "only config nodes have %s; %q is declared with %q", what, node.Name, node.Kind.String())
		return false
	}
	return true
}

// checkPorts enforces exactly the ports true and false on booleans and
// gates. Their order is kept as declared.
func (l *lowerer) checkPorts(node *graph.Node, n *Node) {
	if node.Kind != graph.Boolean && !node.Kind.IsGate() {
		return
	}
	var names []string
	for _, p := range node.Ports {
		names = append(names, p.Name)
	}
	sorted := slices.Sorted(slices.Values(names))
	if slices.Equal(sorted, []string{"false", "true"}) {
		return
	}
	d := l.diags.Errorf(l.at(n.Name), diag.CodeGatePorts, "%s node %q must have exactly the ports true and false", node.Kind, node.Name)
	if len(names) == 0 {
		d.Detail = "it declares none"
	} else {
		d.Detail = "it declares " + diag.Names(names).String()
	}
}

// ref resolves a reference to a node ID, reporting unknown names with a
// suggestion.
func (l *lowerer) ref(id *Ident, path []string) (int, bool) {
	if strings.ContainsAny(strings.TrimLeft(id.Text, "."), ".-") {
		d := l.diags.Errorf(l.at(id), diag.CodeBadName, "%q is not a valid node reference", id.Text)
		d.Detail = "refer to other clusters with leading dots (.X is one cluster up) and the concatenated name"
		return 0, false
	}
	full, ok := l.resolve(id, path)
	if !ok {
		return 0, false
	}
	if n, ok := l.g.Lookup(full); ok {
		return n.ID, true
	}
	d := l.diags.Errorf(l.at(id), diag.CodeUnknownNode, "unknown node %q", id.Text)
	if l.suggested < maxSuggestions {
		// Suggestions cost a scan of every name; the first few are all a
		// reader uses.
		l.suggested++
		d.Detail = l.nodeSuggestion(id.Text, full, path)
	}
	return 0, false
}

// nodeSuggestion proposes the name the user most likely meant, written as
// it would be at the place of the reference.
func (l *lowerer) nodeSuggestion(written, full string, path []string) string {
	local := strings.TrimLeft(written, ".")
	// The same name declared in an enclosing cluster: suggest the dots.
	for up := 1; up <= len(path); up++ {
		cand := strings.Join(path[:len(path)-up], "") + local
		if _, ok := l.g.Lookup(cand); ok {
			return diag.Sprintf("did you mean %q? (declared %d cluster(s) up)", strings.Repeat(".", up)+local, up)
		}
	}
	if l.names == nil {
		for _, n := range l.g.Nodes {
			l.names = append(l.names, n.Name)
		}
	}
	best := diag.Closest(full, l.names)
	if best == "" {
		return ""
	}
	prefix := strings.Join(path, "")
	if strings.HasPrefix(best, prefix) && strings.HasPrefix(full, prefix) {
		return diag.Sprintf("did you mean %q?", strings.Repeat(".", len(written)-len(local))+best[len(prefix):])
	}
	return diag.Sprintf("did you mean %q (full name)?", best)
}

func (l *lowerer) unquote(s *Str) string {
	v, err := Unquote(s.Raw)
	if err != nil {
		l.diags.Errorf(l.atPos(s.Pos, s.EndPos), diag.CodeEscape, "bad string literal: %v", err)
		return strings.Trim(s.Raw, `"`)
	}
	return v
}

// predicate parses a predicate string, mapping errors back into the file.
func (l *lowerer) predicate(s *Str) pred.Expr {
	text := l.unquote(s)
	e, err := pred.Parse(text)
	if err != nil {
		off := 0
		msg := err.Error()
		if pe, ok := err.(*pred.Error); ok {
			off, msg = pe.Offset, pe.Msg
		}
		// Offsets count in the unquoted text; escapes are rare in predicates.
		start := s.Pos.Offset + 1 + min(off, len(s.Raw)-2)
		l.diags.Errorf(diag.Range{File: l.src.File, Start: start, End: start + 1}, diag.CodeBadPredicate, "bad predicate: %s", msg)
		return nil
	}
	l.preds = append(l.preds, parsedPred{s, e})
	return e
}

// checkAtoms gives Unicorn pred(KEY, VALUE) atoms Dragonet's meaning and
// warns where dragonc cannot check it: a value it does not know for a
// field key (kept as an opaque value, exclusive of the key's other
// values), a KEY that names no node of this graph, and a VALUE that is no
// port of the node named. Warnings, not errors: Dragonet's models refer to
// nodes of the other graph (a PRG naming LPG nodes) and still load.
func (l *lowerer) checkAtoms() {
	var names []string
	for _, pp := range l.preds {
		var opaque []pred.Atom
		pred.Inspect(pp.e, func(e pred.Expr) bool {
			if a, ok := pred.OpaqueValue(e); ok {
				opaque = append(opaque, a)
				return false
			}
			if a, ok := e.(pred.Atom); ok {
				l.checkNodeAtom(pp.s, a, &names)
			}
			return true
		})
		for _, a := range opaque {
			d := l.diags.Warnf(l.atomRange(pp.s, a), diag.CodeOpaqueValue, "value %q of %s is not one dragonc knows; it is kept as an opaque value", a.Value, a.Name)
			d.Detail = "no frame satisfies it by itself, and it excludes every other value of " + diag.Clip(a.Name) + ", as in Dragonet"
		}
	}
}

func (l *lowerer) checkNodeAtom(s *Str, a pred.Atom, names *[]string) {
	n, ok := l.g.Lookup(a.Name)
	if !ok {
		if *names == nil {
			for _, n := range l.g.Nodes {
				*names = append(*names, n.Name)
			}
		}
		d := l.diags.Warnf(l.atomRange(s, a), diag.CodeAtomNode, "pred(%s,%s) names no node of graph %s; it stays an opaque atom", a.Name, a.Value, l.g.Name)
		if best := diag.Closest(a.Name, *names); best != "" {
			d.Detail = diag.Sprintf("did you mean %q?", best)
		}
		return
	}
	if n.Port(a.Value) != nil {
		return
	}
	var ports []string
	for _, p := range n.Ports {
		ports = append(ports, p.Name)
	}
	d := l.diags.Warnf(l.atomRange(s, a), diag.CodeAtomPort, "pred(%s,%s): node %s has no port %q", a.Name, a.Value, a.Name, a.Value)
	if best := diag.Closest(a.Value, ports); best != "" {
		d.Detail = diag.Sprintf("did you mean %q?", best)
	} else if len(ports) > 0 {
		d.Detail = "its ports are " + diag.Names(ports).String()
	}
}

// atomRange is where an atom's name stands in a predicate string, or the
// whole string when it cannot be found.
func (l *lowerer) atomRange(s *Str, a pred.Atom) diag.Range {
	if i := strings.Index(s.Raw, a.Name); i >= 0 {
		start := s.Pos.Offset + i
		return diag.Range{File: l.src.File, Start: start, End: start + len(a.Name)}
	}
	return l.atPos(s.Pos, s.EndPos)
}

func (l *lowerer) smtText(b *SMTBlock) string {
	src := l.src.File.Src
	if b == nil || b.EndPos.Offset > len(src) || b.Pos.Offset >= b.EndPos.Offset {
		return ""
	}
	text := string(src[b.Pos.Offset:b.EndPos.Offset])
	text = strings.TrimSuffix(strings.TrimPrefix(text, "{"), "}")
	return strings.TrimSpace(text)
}

// number reads a numeric literal.
func (l *lowerer) number(n *Num, integer bool) (float64, bool) {
	v, err := strconv.ParseFloat(n.Text, 64)
	if err != nil || integer && strings.Contains(n.Text, ".") {
		l.diags.Errorf(l.atPos(n.Pos, n.EndPos), diag.CodeBadValue, "%q is not a whole number", n.Text)
		return 0, false
	}
	if n.Neg {
		v = -v
	}
	return v, true
}

func (l *lowerer) props(ps []*Prop) []graph.Prop {
	var out []graph.Prop
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Key.Text] {
			l.diags.Errorf(l.at(p.Key), diag.CodeRepeated, "property %q is given twice", p.Key.Text)
			continue
		}
		seen[p.Key.Text] = true
		out = append(out, graph.Prop{Key: p.Key.Text, Value: l.value(p.Value), Src: l.srcOf(p.Key.Pos)})
	}
	return out
}

func (l *lowerer) value(v *Value) graph.Value {
	switch {
	case v.Str != nil:
		return graph.Value{Kind: graph.StrValue, Str: l.unquote(v.Str)}
	case v.Num != nil:
		n, _ := l.number(v.Num, false)
		out := graph.Value{Kind: graph.NumValue, Num: n, Unit: string(v.Unit)}
		if v.Hi != nil {
			hi, _ := l.number(v.Hi, false)
			out.Hi, out.Range = hi, true
			if hi < n {
				l.diags.Errorf(l.atPos(v.Pos, v.EndPos), diag.CodeBadValue, "range %s..%s ends below its start", v.Num.Text, v.Hi.Text)
			}
		}
		return out
	case v.Name != nil:
		return graph.Value{Kind: graph.NameValue, Str: v.Name.Text}
	}
	out := graph.Value{Kind: graph.ListValue}
	for _, e := range v.List {
		out.List = append(out.List, l.value(e))
	}
	return out
}

// confType checks and lowers a configuration type.
func (l *lowerer) confType(t *ConfType) *graph.ConfType {
	var out *graph.ConfType
	switch {
	case t.Optional != nil:
		out = &graph.ConfType{Kind: graph.MaybeType, Elem: l.confType(t.Optional)}
	case t.Set != nil || t.List != nil:
		elem := t.Set
		if elem == nil {
			elem = t.List
		}
		out = &graph.ConfType{Kind: graph.ListType, Elem: l.confType(elem), Ordered: t.List != nil, LenMin: -1, LenMax: -1}
		if b := t.Bounds; b != nil {
			l.bounds(out, b)
		}
		return out
	case len(t.Tuple) > 0:
		out = &graph.ConfType{Kind: graph.TupleType}
		seen := map[string]bool{}
		for _, el := range t.Tuple {
			if seen[el.Label.Text] {
				l.diags.Errorf(l.at(el.Label), diag.CodeBadType, "tuple label %q is used twice", el.Label.Text)
			}
			seen[el.Label.Text] = true
			out.Fields = append(out.Fields, graph.TupleField{Label: el.Label.Text, Type: l.confType(el.Type)})
		}
	case len(t.Enum) > 0:
		out = &graph.ConfType{Kind: graph.EnumType}
		for _, e := range t.Enum {
			if slices.Contains(out.Enum, e.Text) {
				l.diags.Errorf(l.at(e), diag.CodeBadType, "enum value %q is listed twice", e.Text)
				continue
			}
			out.Enum = append(out.Enum, e.Text)
		}
	case t.Named != nil:
		out = l.namedType(t.Named)
	}
	if t.Bounds != nil {
		l.diags.Errorf(l.atPos(t.Bounds.Pos, t.Bounds.EndPos), diag.CodeBadBounds, "only list types {T} and [T] take a length bound")
	}
	if out == nil {
		out = &graph.ConfType{Kind: graph.BoolType}
	}
	return out
}

func (l *lowerer) bounds(t *graph.ConfType, b *ListBounds) {
	get := func(n *Num) int {
		if n == nil {
			return -1
		}
		v, ok := l.number(n, true)
		if !ok {
			return -1
		}
		if n.Neg || v > math.MaxInt32 {
			l.diags.Errorf(l.atPos(n.Pos, n.EndPos), diag.CodeBadBounds, "list length %s is out of range", n.Text)
			return -1
		}
		return int(v)
	}
	lo, hi := get(b.Lo), get(b.Hi)
	switch {
	case b.Lo == nil && b.Hi == nil:
		l.diags.Errorf(l.atPos(b.Pos, b.EndPos), diag.CodeBadBounds, "empty list bound").Detail = "write <N>, <N,>, <,N> or <N,M>"
	case !b.Comma:
		t.LenMin, t.LenMax = lo, lo
	default:
		t.LenMin, t.LenMax = lo, hi
		if lo >= 0 && hi >= 0 && lo > hi {
			l.diags.Errorf(l.atPos(b.Pos, b.EndPos), diag.CodeBadBounds, "list bound <%d,%d> has its minimum above its maximum", lo, hi)
		}
	}
}

var typeNames = []string{"UInt", "SInt", "Int", "Bool", "Enum"}

func (l *lowerer) namedType(n *NamedType) *graph.ConfType {
	r := l.atPos(n.Pos, n.EndPos)
	name, args := n.Name, n.Args
	// Unicorn accepts UInt64 for UInt 64.
	for _, p := range []string{"UInt", "SInt"} {
		if digits, ok := strings.CutPrefix(name, p); ok && digits != "" && isDigits(digits) && len(args) == 0 {
			name = p
			args = []*Num{{Pos: n.Pos, Text: digits, EndPos: n.EndPos}}
		}
	}
	want := map[string]int{"UInt": 1, "SInt": 1, "Int": 2, "Bool": 0}
	nargs, known := want[name]
	if !known {
		d := l.diags.Errorf(r, diag.CodeBadType, "unknown configuration type %q", name)
		if s := diag.Closest(name, typeNames); s != "" {
			d.Detail = diag.Sprintf("did you mean %q?", s)
		} else {
			d.Detail = "types are UInt N, SInt N, Int LO HI, Bool, Enum (...), <T>, {T}, [T] and (label: T, ...)"
		}
		return &graph.ConfType{Kind: graph.BoolType}
	}
	if len(args) != nargs {
		l.diags.Errorf(r, diag.CodeBadType, "%s takes %d number(s), not %d", name, nargs, len(args))
		return &graph.ConfType{Kind: graph.BoolType}
	}
	vals := make([]int64, len(args))
	for i, a := range args {
		v, err := strconv.ParseInt(a.Text, 10, 64)
		if err != nil {
			l.diags.Errorf(l.atPos(a.Pos, a.EndPos), diag.CodeBadType, "%q is not a whole number that fits 64 bits", a.Text)
			return &graph.ConfType{Kind: graph.BoolType}
		}
		if a.Neg {
			v = -v
		}
		vals[i] = v
	}
	switch name {
	case "Bool":
		return &graph.ConfType{Kind: graph.BoolType}
	case "UInt":
		bits := vals[0]
		if bits < 1 || bits > 64 {
			l.diags.Errorf(r, diag.CodeBadType, "UInt %d: the width must be 1 to 64 bits", bits)
			return &graph.ConfType{Kind: graph.BoolType}
		}
		maxV := int64(math.MaxInt64)
		if bits < 63 {
			maxV = int64(1)<<bits - 1
		}
		return &graph.ConfType{Kind: graph.IntType, Min: 0, Max: maxV}
	case "SInt":
		bits := vals[0]
		if bits < 2 || bits > 64 {
			l.diags.Errorf(r, diag.CodeBadType, "SInt %d: the width must be 2 to 64 bits", bits)
			return &graph.ConfType{Kind: graph.BoolType}
		}
		if bits == 64 {
			return &graph.ConfType{Kind: graph.IntType, Min: math.MinInt64, Max: math.MaxInt64}
		}
		p := int64(1) << (bits - 1)
		return &graph.ConfType{Kind: graph.IntType, Min: -p, Max: p - 1}
	}
	if vals[0] >= vals[1] {
		l.diags.Errorf(r, diag.CodeBadType, "Int %d %d: the lower bound must be below the upper bound", vals[0], vals[1])
	}
	return &graph.ConfType{Kind: graph.IntType, Min: vals[0], Max: vals[1]}
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkCycles reports every cycle through normal edges.
func (l *lowerer) checkCycles() {
	for _, cyc := range l.g.Cycles() {
		names := make([]string, len(cyc))
		for i, id := range cyc {
			names[i] = l.g.Nodes[id].Name
		}
		first := l.g.Nodes[cyc[0]]
		d := l.diags.Errorf(l.nodeRange(first), diag.CodeCycle, "cycle through normal edges: %s", diag.Names(names))
		d.Detail = "packets must not loop; use a spawn edge to start a new activation"
	}
}

func (l *lowerer) nodeRange(n *graph.Node) diag.Range {
	nd := l.decls[n.ID]
	return l.at(nd.ast.Name)
}

// checkReachable warns about nodes that no entry point reaches. Entry
// points are the first node declared (Unicorn models begin with the node
// where packets enter) and every node marked "source" (in Dragonet's PRGs
// the receive queues, where software picks packets up). Sinks without
// inputs, such as transmit queues of a receive-only model, are exempt.
func (l *lowerer) checkReachable() {
	var roots []int
	if len(l.g.Nodes) > 0 {
		roots = append(roots, 0)
	}
	for _, n := range l.g.Nodes {
		if n.HasAttr("source") {
			roots = append(roots, n.ID)
		}
	}
	if len(l.g.Nodes) == 0 {
		l.diags.Warnf(l.at(l.src.AST.Graph.Name), diag.CodeEmptyGraph, "graph %q declares no nodes", l.g.Name)
		return
	}
	seen := l.g.Reachable(roots)
	preds := l.g.Preds()
	spawned := make([]bool, len(l.g.Nodes))
	for _, n := range l.g.Nodes {
		for _, s := range n.Spawns {
			spawned[s.Target] = true
		}
	}
	var unreached []int
	for _, n := range l.g.Nodes {
		if seen[n.ID] || n.HasAttr("sink") && len(preds[n.ID]) == 0 && !spawned[n.ID] {
			continue
		}
		unreached = append(unreached, n.ID)
	}
	sort.Ints(unreached)
	for _, id := range unreached {
		n := l.g.Nodes[id]
		l.diags.Warnf(l.nodeRange(n), diag.CodeUnreachable, "node %q is not reachable from any source", n.Name)
	}
}

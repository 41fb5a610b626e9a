package prg

import (
	"regexp"
	"slices"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// Dragonet's PRGs may name nodes of the LPG in their predicates: in
// Graphs/E10k/prgE10kImpl-minimal.unicorn the NIC's L2 filter lets through
// pred(RxL2EtherValidUnicast,true) and pred(RxL2EtherValidLocalMAC,true),
// in prgE10kImpl-offload.unicorn the checksum nodes report
// pred(RxL3IPv4ValidChecksum,true). Such an atom means what the LPG node of
// that label decides on that port: Dragonet embeds by label, matching PRG
// and LPG nodes by their names (lib/Dragonet/Embedding.hs), and a
// predicate over a node's outcome is that node's port predicate
// (lib/Dragonet/Predicate.hs). dragonc resolves them the same way when it
// embeds (Resolve), and refuses a model whose atoms name a node the LPG
// lacks: left opaque, no frame would satisfy them, and the NIC would drop
// or misroute every frame that reaches them.

// ForeignAtom is a pred(NODE,PORT) atom naming no node of the model, and
// where it is written.
type ForeignAtom struct {
	Atom pred.Atom
	At   diag.Range
}

// foreignAtoms lists the atoms of g's port predicates that name no node of
// g, each once, with its place in the file.
func foreignAtoms(g *graph.Graph, file *diag.File) []ForeignAtom {
	var out []ForeignAtom
	seen := map[ForeignAtom]bool{}
	for _, n := range g.Nodes {
		for _, p := range n.Ports {
			pred.Inspect(p.Pred, func(e pred.Expr) bool {
				if _, ok := pred.OpaqueValue(e); ok {
					return false // a field's value dragonc does not know, not a node
				}
				a, ok := e.(pred.Atom)
				if !ok {
					return true
				}
				if _, ok := g.Lookup(a.Name); ok {
					return true
				}
				f := ForeignAtom{Atom: a, At: atomAt(file, n.Src.Offset, a)}
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
				return true
			})
		}
	}
	return out
}

// atomAt is where pred(NAME,VALUE) is written in the declaration of the
// node starting at off (the node's own position when it cannot be found).
func atomAt(file *diag.File, off int, a pred.Atom) diag.Range {
	r := diag.Range{File: file, Start: off, End: off}
	if file == nil || off < 0 || off > len(file.Src) {
		return r
	}
	re := regexp.MustCompile(`pred\(\s*` + regexp.QuoteMeta(a.Name) + `\s*,\s*` + regexp.QuoteMeta(a.Value) + `\s*\)`)
	if loc := re.FindIndex(file.Src[off:]); loc != nil {
		r.Start, r.End = off+loc[0], off+loc[1]
	}
	return r
}

// Resolve returns the model with every foreign atom replaced by the
// predicate of the LPG port it names, as Dragonet reads it (see above);
// the model itself when it has none. An atom the LPG does not resolve (no
// such node, no such port, or a port without a predicate) is an error at
// its place in the file.
func (m *Model) Resolve(lpg *graph.Graph) (*Model, diag.List) {
	if len(m.Foreign) == 0 {
		return m, nil
	}
	var diags diag.List
	meaning := map[pred.Atom]pred.Expr{}
	for _, f := range m.Foreign {
		if _, done := meaning[f.Atom]; done {
			continue
		}
		e, miss := lpgPortPred(lpg, f.Atom)
		if miss == resolved {
			meaning[f.Atom] = e
			continue
		}
		const head = "pred(%s,%s) names no node of NIC model %s"
		var d *diag.Diagnostic
		switch miss {
		case noLPG:
			d = diags.Errorf(f.At, diag.CodeForeignAtom, head+", and there is no LPG to resolve it", f.Atom.Name, f.Atom.Value, m.Name)
		case noNode:
			d = diags.Errorf(f.At, diag.CodeForeignAtom, head+", nor of the LPG %s: no frame is known to satisfy it", f.Atom.Name, f.Atom.Value, m.Name, lpg.Name)
		case noPort:
			d = diags.Errorf(f.At, diag.CodeForeignAtom, head+", and the LPG's node %s has no port %s", f.Atom.Name, f.Atom.Value, m.Name, f.Atom.Name, f.Atom.Value)
		default:
			d = diags.Errorf(f.At, diag.CodeForeignAtom, head+", and the LPG's port %s.%s says nothing of packet fields", f.Atom.Name, f.Atom.Value, m.Name, f.Atom.Name, f.Atom.Value)
		}
		d.Detail = "Dragonet reads such an atom as the decision of the LPG node of that name on that port; give the port a predicate over packet fields (docs/language.md) instead"
	}
	if diags.HasErrors() {
		return nil, diags
	}
	c := *m
	c.G = m.G.Clone()
	c.Foreign = nil
	for _, n := range c.G.Nodes {
		for _, p := range n.Ports {
			p.Pred = substitute(p.Pred, meaning)
		}
	}
	return &c, nil
}

// Why an atom does not resolve.
const (
	resolved = iota
	noLPG
	noNode
	noPort
	noPredicate
)

// lpgPortPred is the predicate of the LPG port an atom names, or why there
// is none. A port without a predicate of its own is the node's default:
// it takes what none of the node's other ports takes (a check's false
// port), when they all have predicates.
func lpgPortPred(lpg *graph.Graph, a pred.Atom) (pred.Expr, int) {
	if lpg == nil {
		return nil, noLPG
	}
	n, ok := lpg.Lookup(a.Name)
	if !ok {
		return nil, noNode
	}
	p := n.Port(a.Value)
	if p == nil {
		return nil, noPort
	}
	if p.Pred != nil {
		return p.Pred, resolved
	}
	var others []pred.Expr
	for _, o := range n.Ports {
		if o == p {
			continue
		}
		if o.Pred == nil {
			return nil, noPredicate
		}
		others = append(others, o.Pred)
	}
	if len(others) == 0 {
		return nil, noPredicate
	}
	return pred.Not{X: pred.Or{X: others}}, resolved
}

// substitute replaces the atoms of e that meaning maps.
func substitute(e pred.Expr, meaning map[pred.Atom]pred.Expr) pred.Expr {
	switch x := e.(type) {
	case pred.Atom:
		if r, ok := meaning[x]; ok {
			return r
		}
	case pred.And:
		if _, ok := pred.OpaqueValue(x); ok {
			return x
		}
		return pred.And{X: substituteAll(x.X, meaning)}
	case pred.Or:
		return pred.Or{X: substituteAll(x.X, meaning)}
	case pred.Not:
		return pred.Not{X: substitute(x.X, meaning)}
	}
	return e
}

func substituteAll(xs []pred.Expr, meaning map[pred.Atom]pred.Expr) []pred.Expr {
	out := slices.Clone(xs)
	for i, x := range out {
		out[i] = substitute(x, meaning)
	}
	return out
}

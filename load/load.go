// Package load reads any dragonc file and says what it is: a stack file
// (endpoints, from which the LPG is derived), a PRG (a graph with
// configuration nodes) or an LPG (a graph without). It parses, lowers and
// checks the file as the commands that take it will, and returns every
// diagnostic, sorted.
package load

import (
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
)

// Kind is what a file holds.
type Kind int

// File kinds.
const (
	Broken Kind = iota // a syntax error, or a tree that did not lower
	Stack              // a stack file; Graph is its derived LPG
	PRG                // a graph with configuration nodes
	LPG                // a graph without configuration nodes
)

// A File is a dragonc file read by File.
type File struct {
	Source *dsl.Source
	Graph  *graph.Graph // the graph, or a stack's derived LPG; nil when broken
	Stack  *lpg.Stack   // a stack file's stack; nil otherwise
	Diags  diag.List
}

// Kind says what the file holds, once it loaded without errors.
func (f *File) Kind() Kind {
	switch {
	case f.Diags.HasErrors() || f.Graph == nil:
		return Broken
	case f.Stack != nil:
		return Stack
	case HasConfig(f.Graph):
		return PRG
	}
	return LPG
}

// Parse reads file name's source: parsed (a partial tree is not
// lowered), lowered, a PRG's configuration nodes checked as embed will
// check them, a stack's LPG derived.
func Parse(name string, src []byte) *File {
	s, diags := dsl.Parse(name, src)
	f := &File{Source: s}
	switch {
	case diags.HasErrors():
		// A syntax error: the partial tree is not lowered.
	case s.AST.Graph != nil:
		g, more := dsl.Lower(s)
		f.Graph = g
		diags = append(diags, more...)
		if g != nil && !more.HasErrors() && HasConfig(g) {
			_, more := prg.NewModel(g, s.File)
			diags = append(diags, more...)
		}
	case s.AST.Stack != nil:
		st, more := lpg.Lower(s)
		diags = append(diags, more...)
		if !more.HasErrors() {
			f.Stack = st
			g, err := lpg.Derive(st)
			if err != nil {
				diags.Errorf(diag.Range{File: s.File}, diag.CodeDerive, "%v", err)
			}
			f.Graph = g
		}
	}
	diags.Sort()
	f.Diags = diags
	return f
}

// HasConfig reports whether g has configuration nodes: a PRG's mark.
func HasConfig(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if n.Kind == graph.Config {
			return true
		}
	}
	return false
}

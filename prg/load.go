package prg

import (
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
)

// Load parses, validates and models a PRG file.
func Load(name string, src []byte) (*Model, diag.List) {
	g, s, diags := dsl.Load(name, src)
	if g == nil || diags.HasErrors() {
		return nil, diags
	}
	m, more := NewModel(g, s.File)
	diags = append(diags, more...)
	diags.Sort()
	if diags.HasErrors() {
		return nil, diags
	}
	return m, diags
}

// Summary describes a model for `dragonc nics`.
type Summary struct {
	Name    string         `json:"name"`
	File    string         `json:"file"`
	Graph   string         `json:"graph"`
	Queues  int            `json:"queues"`
	Tables  []TableSummary `json:"tables"`
	Engines []string       `json:"engines"`
}

// TableSummary is one configuration node in a summary.
type TableSummary struct {
	Node     string `json:"node"`
	Kind     string `json:"kind"`
	Capacity int    `json:"capacity,omitempty"`
}

// Summarize lists what `dragonc nics` shows of a model.
func (m *Model) Summarize(name, file string) Summary {
	s := Summary{Name: name, File: file, Graph: m.Name, Queues: len(m.Queues), Tables: []TableSummary{}, Engines: []string{}}
	if n, ok := m.Number("rx_queues"); ok {
		s.Queues = int(n)
	}
	for _, sp := range m.Spaces {
		t := TableSummary{Node: sp.Node, Kind: string(sp.Kind)}
		switch sp.Kind {
		case Table:
			t.Capacity = sp.Capacity
		case Hash:
			t.Capacity = sp.Buckets
		case Enum:
			t.Capacity = len(sp.Choices)
		}
		s.Tables = append(s.Tables, t)
	}
	for _, e := range m.Engine {
		s.Engines = append(s.Engines, e.Name+" ("+e.Kind+")")
	}
	return s
}

package dsl

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/dragonc/dragonc/internal/diag"
)

// Dimension is what a unit measures.
type Dimension uint8

// Dimensions of units.
const (
	Rate      Dimension = iota + 1 // packets a second
	Size                           // bytes
	Frequency                      // hertz
	Duration                       // seconds
	Fraction                       // a part of the whole
)

// UnitDef is one unit a number may carry: its spelling, what it
// measures, and its size in the dimension's base (pps, bytes, Hz,
// seconds, 1).
type UnitDef struct {
	Name  string
	Dim   Dimension
	Scale float64
}

// Units is every unit of the language, written once: both parsers read
// units through UnitAt, the formatter prints them as written, and the
// packages that lower numbers scale them with Scale. A new unit is one
// line here.
var Units = []UnitDef{
	{"pps", Rate, 1},
	{"kpps", Rate, 1e3},
	{"Mpps", Rate, 1e6},
	{"B", Size, 1},
	{"KiB", Size, 1 << 10},
	{"MiB", Size, 1 << 20},
	// KB and MB are read as KiB and MiB, as the NIC datasheets the models
	// cite write memory sizes.
	{"KB", Size, 1 << 10},
	{"MB", Size, 1 << 20},
	{"MHz", Frequency, 1e6},
	{"GHz", Frequency, 1e9},
	{"ns", Duration, 1e-9},
	{"us", Duration, 1e-6},
	{"percent", Fraction, 0.01},
}

// attrDims are the dimensions an endpoint attribute or a service setting
// takes (stack files); a property of a graph takes any unit.
var attrDims = []Dimension{Rate, Size}

// Scale returns how many of the dimension's base a unit is, and whether
// the unit measures dim.
func Scale(unit string, dim Dimension) (float64, bool) {
	for _, u := range Units {
		if u.Name == unit && u.Dim == dim {
			return u.Scale, true
		}
	}
	return 0, false
}

// UnitNames lists the units of a dimension in the table's order, for
// messages ("pps, kpps or Mpps").
func UnitNames(dim Dimension) []string {
	var out []string
	for _, u := range Units {
		if u.Dim == dim {
			out = append(out, u.Name)
		}
	}
	return out
}

// unitIn reports whether name is a unit of one of dims (any unit when
// dims is nil).
func unitIn(name string, dims []Dimension) bool {
	for _, u := range Units {
		if u.Name != name {
			continue
		}
		if dims == nil {
			return true
		}
		for _, d := range dims {
			if u.Dim == d {
				return true
			}
		}
	}
	return false
}

func unitsOf(dims []Dimension) []string {
	var out []string
	for _, u := range Units {
		if unitIn(u.Name, dims) {
			out = append(out, u.Name)
		}
	}
	return out
}

// UnitAt is the grammar's rule for the unit after a number, shared by
// participle (through AttrUnit and PropUnit) and the generated parser.
// The unit is the next token when that is a unit of dims, with or without
// a space before it (`1.2Mpps`, `4 MiB`). A word written against the
// number that is no such unit (`300kps`) is an error: the number has a
// unit, spelled wrong. Otherwise the number has no unit.
func UnitAt(word string, isWord, adjacent bool, dims []Dimension) (unit string, err error) {
	switch {
	case isWord && unitIn(word, dims):
		return word, nil
	case isWord && adjacent:
		return "", &unitError{word: word, dims: dims}
	}
	return "", nil
}

// unitError is a word written against a number that is no unit.
type unitError struct {
	word string
	dims []Dimension
}

func (e *unitError) Error() string { return diag.Sprintf("unknown unit %q", e.word) }

// expected is what the error says was expected, in a user's words.
func (e *unitError) expected() string { return "a unit (" + orList(unitsOf(e.dims)) + ")" }

// AttrUnit is the unit of an endpoint attribute's or a service setting's
// number: a rate or a size.
type AttrUnit string

// Parse reads an AttrUnit for participle.
func (u *AttrUnit) Parse(lex *lexer.PeekingLexer) error {
	s, err := parseUnit(lex, attrDims)
	*u = AttrUnit(s)
	return err
}

// PropUnit is the unit of a graph property's number: any unit.
type PropUnit string

// Parse reads a PropUnit for participle.
func (u *PropUnit) Parse(lex *lexer.PeekingLexer) error {
	s, err := parseUnit(lex, nil)
	*u = PropUnit(s)
	return err
}

func parseUnit(lex *lexer.PeekingLexer, dims []Dimension) (string, error) {
	raw := lex.RawPeek()
	t := lex.Peek()
	unit, err := UnitAt(t.Value, t.Type == kindType[kIdent], raw == t, dims)
	if err != nil {
		return "", participle.Errorf(t.Pos, "%s", err)
	}
	if unit == "" {
		return "", participle.NextMatch
	}
	lex.Next()
	return unit, nil
}

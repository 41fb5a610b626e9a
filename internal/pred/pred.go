// Package pred is the predicate language of dragonc: boolean expressions
// over packet fields that say which packets leave a port. Dragonc
// expressions (`udp.dport == 53 && ip.dst == 10.0.0.1`) and Unicorn terms
// (`and(pred(EthType,IPv4),not(pred(IpProt,UDP)))`) parse into the same
// form. Node outcomes and hashes are opaque atoms.
package pred

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Expr is a predicate. The concrete types are And, Or, Not, Const, Cmp and
// Atom.
type Expr interface {
	expr()
	String() string
}

// And is true when every operand is.
type And struct{ X []Expr }

// Or is true when some operand is.
type Or struct{ X []Expr }

// Not negates its operand.
type Not struct{ X Expr }

// Const is a literal truth value.
type Const bool

// Op is a comparison operator.
type Op int

// Comparison operators. In tests membership in Ranges.
const (
	Eq Op = iota
	Ne
	Lt
	Le
	Gt
	Ge
	In
)

var opNames = [...]string{"==", "!=", "<", "<=", ">", ">=", "in"}

func (o Op) String() string { return opNames[o] }

// Range is an inclusive interval of field values.
type Range struct{ Lo, Hi uint64 }

// Cmp compares a field, optionally masked (field & Mask), with a value or
// tests membership in a set of ranges.
type Cmp struct {
	Field  string
	ID     int    // the field's index in the vocabulary (FieldInfo.ID)
	Mask   uint64 // 0 means no mask
	Op     Op
	Value  uint64
	Ranges []Range // for In, sorted and merged
}

// Atom is an opaque proposition: a node outcome (`pred(RxL2EtherValidCRC,true)`:
// the node left through port true) or a Unicorn pred() over a field
// dragonc does not know. It renders in the Unicorn form.
type Atom struct{ Name, Value string }

func (And) expr()   {}
func (Or) expr()    {}
func (Not) expr()   {}
func (Const) expr() {}
func (Cmp) expr()   {}
func (Atom) expr()  {}

// String renders the canonical dragonc form, which parses back to an equal
// expression.
func (e And) String() string {
	if a, ok := e.opaque(); ok {
		return a.String() // an opaque value prints as it was written
	}
	return join(e.X, " && ", "true")
}

// opaque reports whether e is the form opaqueValue builds.
func (e And) opaque() (Atom, bool) {
	if len(e.X) != 2 {
		return Atom{}, false
	}
	c, ok1 := e.X[0].(Cmp)
	a, ok2 := e.X[1].(Atom)
	if !ok1 || !ok2 || unicornFields[a.Name] != c.Field || c.Op != In {
		return Atom{}, false
	}
	return a, true
}

// OpaqueValue reports whether e is pred(KEY, VALUE) with a VALUE dragonc
// does not know for a field KEY, and returns its atom.
func OpaqueValue(e Expr) (Atom, bool) {
	if a, ok := e.(And); ok {
		return a.opaque()
	}
	return Atom{}, false
}

// String renders the canonical dragonc form.
func (e Or) String() string { return join(e.X, " || ", "false") }

// String renders the canonical dragonc form.
func (e Not) String() string {
	switch e.X.(type) {
	case Atom, Const, Not:
		return "!" + e.X.String()
	}
	return "!(" + e.X.String() + ")"
}

// String renders the canonical dragonc form.
func (e Const) String() string {
	if e {
		return "true"
	}
	return "false"
}

// String renders the canonical dragonc form.
func (e Atom) String() string { return "pred(" + e.Name + "," + e.Value + ")" }

// String renders the canonical dragonc form.
func (e Cmp) String() string {
	lhs := e.Field
	if e.Mask != 0 {
		lhs = fmt.Sprintf("%s & %s", e.Field, FormatValue(e.Field, e.Mask))
	}
	if e.Op == In {
		parts := make([]string, len(e.Ranges))
		for i, r := range e.Ranges {
			if r.Lo == r.Hi {
				parts[i] = FormatValue(e.Field, r.Lo)
			} else {
				parts[i] = FormatValue(e.Field, r.Lo) + ".." + FormatValue(e.Field, r.Hi)
			}
		}
		return fmt.Sprintf("%s in {%s}", lhs, strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%s %s %s", lhs, e.Op, FormatValue(e.Field, e.Value))
}

func join(xs []Expr, sep, empty string) string {
	if len(xs) == 0 {
		return empty
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = paren(x)
	}
	return strings.Join(parts, sep)
}

func paren(x Expr) string {
	switch x.(type) {
	case And, Or:
		return "(" + x.String() + ")"
	}
	return x.String()
}

// Addr is an IPv4 address held as a field value (ip.src, ip.dst, arp.tpa, arp.spa)
// or a stack's address.
func Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// AddrValue is the field value of an IPv4 address.
func AddrValue(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// FormatValue prints a value in the most readable form for its field:
// dotted quads for addresses, MAC notation for Ethernet addresses,
// hexadecimal for EtherTypes and masks wider than a byte.
func FormatValue(field string, v uint64) string {
	switch field {
	case "ip.src", "ip.dst", "arp.tpa", "arp.spa":
		if v <= 0xFFFFFFFF {
			return Addr(uint32(v)).String()
		}
	case "eth.dst", "eth.src", "arp.sha":
		if v <= 0xFFFFFFFFFFFF {
			return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", v>>40, v>>32&0xFF, v>>24&0xFF, v>>16&0xFF, v>>8&0xFF, v&0xFF)
		}
	case "eth.type", "tcp.flags":
		return fmt.Sprintf("0x%04x", v)
	}
	return fmt.Sprint(v)
}

// Env supplies what an expression is evaluated against: field values of
// one frame (ok false when the frame has no such field) and the truth of
// opaque atoms.
type Env interface {
	Value(id int) (v uint64, ok bool)
	Atom(a Atom) bool
}

// Eval decides e on env.
func Eval(e Expr, env Env) bool {
	switch e := e.(type) {
	case nil:
		return true
	case Const:
		return bool(e)
	case And:
		for _, x := range e.X {
			if !Eval(x, env) {
				return false
			}
		}
		return true
	case Or:
		for _, x := range e.X {
			if Eval(x, env) {
				return true
			}
		}
		return false
	case Not:
		return !Eval(e.X, env)
	case Atom:
		return env.Atom(e)
	case Cmp:
		v, ok := env.Value(e.ID)
		if !ok {
			return false
		}
		return e.Holds(v)
	}
	panic(fmt.Sprintf("dragonc: internal error: unknown predicate %T", e))
}

// Holds reports whether the comparison is true of field value v.
func (e Cmp) Holds(v uint64) bool {
	if e.Mask != 0 {
		v &= e.Mask
	}
	switch e.Op {
	case Eq:
		return v == e.Value
	case Ne:
		return v != e.Value
	case Lt:
		return v < e.Value
	case Le:
		return v <= e.Value
	case Gt:
		return v > e.Value
	case Ge:
		return v >= e.Value
	case In:
		i := sort.Search(len(e.Ranges), func(i int) bool { return e.Ranges[i].Hi >= v })
		return i < len(e.Ranges) && e.Ranges[i].Lo <= v
	}
	return false
}

// MapEnv is an Env backed by maps; handy in tests and for metadata.
type MapEnv struct {
	Values map[string]uint64
	Atoms  map[Atom]bool
}

// Value implements Env.
func (m MapEnv) Value(id int) (uint64, bool) {
	v, ok := m.Values[FieldNames()[id]]
	return v, ok
}

// Atom implements Env.
func (m MapEnv) Atom(a Atom) bool { return m.Atoms[a] }

// NormRanges sorts rs and merges ranges that overlap or touch, in place:
// the result shares rs's array.
func NormRanges(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.Lo, b.Lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (r.Lo <= out[n-1].Hi || out[n-1].Hi != ^uint64(0) && r.Lo == out[n-1].Hi+1) {
			if r.Hi > out[n-1].Hi {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Inspect walks an expression depth first, calling f on each node; when f
// returns false, the children of that node are skipped (as go/ast.Inspect).
func Inspect(e Expr, f func(Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	switch e := e.(type) {
	case And:
		for _, x := range e.X {
			Inspect(x, f)
		}
	case Or:
		for _, x := range e.X {
			Inspect(x, f)
		}
	case Not:
		Inspect(e.X, f)
	}
}

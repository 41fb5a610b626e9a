package dsl

import "github.com/alecthomas/participle/v2/lexer"

// The structs in this file are the concrete syntax of the dragonc language.
// They mirror the source closely (the formatter prints them back) and are
// lowered into graph types elsewhere, so no graph depends on struct tags.

// File is one source file: a graph (PRG, explicit LPG or Unicorn) or a
// stack of endpoints.
type File struct {
	Pos    lexer.Position
	Graph  *Graph `parser:"(  @@"`
	Stack  *Stack `parser:" | @@ )"`
	EndPos lexer.Position
}

// Graph is `graph NAME { ... }`.
type Graph struct {
	Pos    lexer.Position
	Name   *Ident  `parser:"'graph' @@ '{'"`
	Decls  []*Decl `parser:"@@* '}'"`
	EndPos lexer.Position
}

// Decl is one declaration at graph or cluster level.
type Decl struct {
	Pos      lexer.Position
	Helpers  *SMTBlock `parser:"(  'helpers' @@"`
	Cluster  *Cluster  `parser:" | @@"`
	Node     *Node     `parser:" | @@"`
	Resource *Resource `parser:" | @@ )"`
	EndPos   lexer.Position
}

// Cluster groups declarations under a name prefix.
type Cluster struct {
	Pos    lexer.Position
	Name   *Ident  `parser:"'cluster' @@ '{'"`
	Decls  []*Decl `parser:"@@* '}'"`
	EndPos lexer.Position
}

// Node is any node declaration: node, boolean, the four gates, or config.
type Node struct {
	Pos    lexer.Position
	Kind   string  `parser:"@('node' | 'boolean' | 'and' | 'or' | 'nand' | 'nor' | 'config')"`
	Name   *Ident  `parser:"@@"`
	Hi     *Num    `parser:"( '..' @@ )? '{'"`
	Items  []*Item `parser:"@@* '}'"`
	EndPos lexer.Position
}

// Item is one entry of a node body. Unicorn fixes their order; dragonc
// accepts any order and keeps the order written.
type Item struct {
	Pos        lexer.Position
	Impl       *Ident      `parser:"(  'implementation' @@"`
	Attr       *Str        `parser:" | 'attr' @@"`
	Spawn      *Spawn      `parser:" | @@"`
	Port       *Port       `parser:" | @@"`
	Constraint *Constraint `parser:" | @@"`
	Semantics  *Semantics  `parser:" | @@"`
	Predicate  *Predicate  `parser:" | @@"`
	Type       *ConfType   `parser:" | 'type' @@"`
	Function   *Ident      `parser:" | 'function' @@"`
	Cost       *Cost       `parser:" | @@"`
	Config     *ConfigSpec `parser:" | @@ )"`
	EndPos     lexer.Position
}

// Ident is a name or a reference as written, with its position. References
// may start with dots (`.X` is one cluster up).
type Ident struct {
	Pos    lexer.Position
	Text   string `parser:"@(Ident | Ref)"`
	EndPos lexer.Position
}

// Str is a string literal as written, quotes and escapes included.
type Str struct {
	Pos    lexer.Position
	Raw    string `parser:"@String"`
	EndPos lexer.Position
}

// Spawn is `spawn NAME TARGET [predicate "..."]*`.
type Spawn struct {
	Name   *Ident `parser:"'spawn' @@"`
	Target *Ident `parser:"@@"`
	Preds  []*Str `parser:"( '[' 'predicate' @@ ']' )*"`
}

// Port is `port NAME+ [TARGET*]`.
type Port struct {
	Names   []*Ident  `parser:"'port' @@+"`
	Targets []*Target `parser:"'[' @@* ']'"`
}

// Target is a successor reference, or a numbered range of them:
// `Queue0..127` names Queue0 to Queue127 (a dragonc extension).
type Target struct {
	Ref *Ident `parser:"@@"`
	Hi  *Num   `parser:"( '..' @@ )?"`
}

// Constraint is `constraint PORT "TEXT"`.
type Constraint struct {
	Port *Ident `parser:"'constraint' @@"`
	Text *Str   `parser:"@@"`
}

// Semantics is `semantics PORT+ { SMT-LIB term }`.
type Semantics struct {
	Ports []*Ident  `parser:"'semantics' @@+"`
	Body  *SMTBlock `parser:"@@"`
}

// Predicate is `predicate PORT "EXPR"`: which packets leave through PORT.
// EXPR is either a dragonc expression or a Unicorn pred()/and()/or()/not()
// term.
type Predicate struct {
	Port *Ident `parser:"'predicate' @@"`
	Expr *Str   `parser:"@@"`
}

// Cost is `cost UNIT NUMBER`, e.g. `cost cycles 40`.
type Cost struct {
	Unit  *Ident `parser:"'cost' @@"`
	Value *Num   `parser:"@@"`
}

// Num is a number as written.
type Num struct {
	Pos    lexer.Position
	Neg    bool   `parser:"@'-'?"`
	Text   string `parser:"@Number"`
	EndPos lexer.Position
}

// SMTBlock is a brace-delimited SMT-LIB text. Only its balance is checked;
// the text between the braces is kept verbatim.
type SMTBlock struct {
	Pos    lexer.Position
	Items  []*SMTItem `parser:"'{' @@* '}'"`
	EndPos lexer.Position
}

// SMTItem is one token or balanced group inside an SMT-LIB block.
type SMTItem struct {
	Block *SMTBlock `parser:"(  @@"`
	Paren *SMTParen `parser:" | @@"`
	Tok   string    `parser:" | @~('{' | '}' | '(' | ')') )"`
}

// SMTParen is a parenthesised SMT-LIB group.
type SMTParen struct {
	Items []*SMTItem `parser:"'(' @@* ')'"`
}

// ConfType is a Unicorn configuration type.
type ConfType struct {
	Pos      lexer.Position
	Optional *ConfType   `parser:"(  '<' @@ '>'"`
	Set      *ConfType   `parser:" | '{' @@ '}'"`
	List     *ConfType   `parser:" | '[' @@ ']'"`
	Tuple    []*TupleEl  `parser:" | '(' @@ ( ',' @@ )* ')'"`
	Enum     []*Ident    `parser:" | 'Enum' '(' @@ ( ',' @@ )* ')'"`
	Named    *NamedType  `parser:" | @@ )"`
	Bounds   *ListBounds `parser:"@@?"`
	EndPos   lexer.Position
}

// TupleEl is `label: TYPE` inside a tuple type.
type TupleEl struct {
	Label *Ident    `parser:"@@ ':'"`
	Type  *ConfType `parser:"@@"`
}

// NamedType is `UInt N`, `UIntN`, `SInt N`, `Int LO HI` or `Bool`.
type NamedType struct {
	Pos    lexer.Position
	Name   string `parser:"@Ident"`
	Args   []*Num `parser:"@@*"`
	EndPos lexer.Position
}

// ListBounds is a list length bound: `<N>`, `<N,>`, `<,N>` or `<N,M>`.
type ListBounds struct {
	Pos    lexer.Position
	Lo     *Num `parser:"'<' @@?"`
	Comma  bool `parser:"( @','"`
	Hi     *Num `parser:"  @@? )? '>'"`
	EndPos lexer.Position
}

// ConfigSpec gives a config node one of the generic configuration kinds of
// docs/language.md section 2: `table { ... }`, `hash { ... }`, `place { ... }` or
// `enum { ... }`. Its properties are interpreted by package prg.
type ConfigSpec struct {
	Pos    lexer.Position
	Kind   string  `parser:"@('table' | 'hash' | 'place' | 'enum' | 'program')"`
	Props  []*Prop `parser:"'{' @@* '}'"`
	EndPos lexer.Position
}

// Resource is a graph-level resource such as `engine CpuA { ... }` or
// `task Mailbox { ... }`: anything a capacity or a cost refers to.
type Resource struct {
	Pos    lexer.Position
	Kind   string  `parser:"@('engine' | 'task' | 'resources')"`
	Name   *Ident  `parser:"@@"`
	Props  []*Prop `parser:"'{' @@* '}'"`
	EndPos lexer.Position
}

// Prop is `key VALUE`: exactly one value per key, so no separators are
// needed.
type Prop struct {
	Pos    lexer.Position
	Key    *Ident `parser:"@@"`
	Value  *Value `parser:"@@"`
	EndPos lexer.Position
}

// Value is a property value: a number (optionally a range and a unit), a
// string, a name, or a bracketed list of values.
type Value struct {
	Pos    lexer.Position
	List   []*Value `parser:"(  '[' @@* ']'"`
	Str    *Str     `parser:" | @@"`
	Num    *Num     `parser:" | @@"`
	Hi     *Num     `parser:"   ( '..' @@ )?"`
	Unit   PropUnit `parser:"   @@?"`
	Name   *Ident   `parser:" | @@ )"`
	EndPos lexer.Position
}

// Stack is a stack file: `stack NAME { ... }` (docs/language.md section 3).
type Stack struct {
	Pos    lexer.Position
	Name   *Ident       `parser:"'stack' @@ '{'"`
	Items  []*StackItem `parser:"@@* '}'"`
	EndPos lexer.Position
}

// StackItem is one item of a stack body.
type StackItem struct {
	Pos       lexer.Position
	Interface *Interface `parser:"(  @@"`
	Cores     *RangeList `parser:" | 'cores' @@"`
	Endpoint  *Endpoint  `parser:" | @@"`
	Service   *Service   `parser:" | @@ )"`
	EndPos    lexer.Position
}

// Service is `service NAME [{ settings }]`: a protocol the stack answers
// (icmp-echo, arp), or the limits on the ICMP errors it sends
// (icmp-errors). The settings are written as endpoint attributes are;
// package lpg says which a service takes.
type Service struct {
	Name     *Ident    `parser:"'service' @@"`
	Settings []*EpAttr `parser:"( '{' @@* '}' )?"`
}

// Interface is `interface NAME { mac MAC (ip IPV4/LEN)* [mtu N] }`.
type Interface struct {
	Name *Ident  `parser:"'interface' @@ '{'"`
	MAC  *Tok    `parser:"'mac' @@"`
	IPs  []*CIDR `parser:"( 'ip' @@ )*"`
	MTU  *Num    `parser:"( 'mtu' @@ )? '}'"`
}

// Tok is one token of any type, with its position; used where a token's
// shape is checked after parsing for a better diagnostic.
type Tok struct {
	Pos    lexer.Position
	Text   string `parser:"@(MAC | IP | Number | Ident)"`
	EndPos lexer.Position
}

// CIDR is `IPV4/LEN`.
type CIDR struct {
	Pos    lexer.Position
	Addr   *Tok `parser:"@@ '/'"`
	Len    *Num `parser:"@@"`
	EndPos lexer.Position
}

// RangeList is `0..7` or `0,2,4..6`.
type RangeList struct {
	Pos    lexer.Position
	Items  []*RangeItem `parser:"@@ ( ',' @@ )*"`
	EndPos lexer.Position
}

// RangeItem is `N` or `N..M`.
type RangeItem struct {
	Lo *Num `parser:"@@"`
	Hi *Num `parser:"( '..' @@ )?"`
}

// Endpoint is `endpoint NAME KIND ... [{ attrs }]`.
type Endpoint struct {
	Name   *Ident    `parser:"'endpoint' @@"`
	Kind   *Ident    `parser:"@@"`
	Listen *Listen   `parser:"(  'listen' @@"`
	Flow   *Flow     `parser:" | 'flow' @@"`
	ID     *Num      `parser:" | @@ )?"`
	Attrs  []*EpAttr `parser:"( '{' @@* '}' )?"`
}

// Addr is an IPv4 address or `*`.
type Addr struct {
	Pos    lexer.Position
	Any    bool `parser:"(  @'*'"`
	IP     *Tok `parser:" | @@ )"`
	EndPos lexer.Position
}

// Listen is `ADDR:PORT[..PORT]`.
type Listen struct {
	Addr *Addr `parser:"@@ ':'"`
	Port *Num  `parser:"@@"`
	Hi   *Num  `parser:"( '..' @@ )?"`
}

// Flow is `ADDR:PORT -> ADDR:PORT`.
type Flow struct {
	LAddr *Addr `parser:"@@ ':'"`
	LPort *Num  `parser:"@@ '->'"`
	RAddr *Addr `parser:"@@ ':'"`
	RPort *Num  `parser:"@@"`
}

// EpAttr is one endpoint attribute (app, core, cores, class, rate,
// message, or the bare flag nodelay: Flag set, Key nil) or one setting of
// a service (rate, burst, peer-rate, peer-burst). The grammar takes any
// key; package lpg checks them.
type EpAttr struct {
	Pos    lexer.Position
	Flag   *Flag      `parser:"(  @@"`
	Key    *Ident     `parser:" | @@"`
	Str    *Str       `parser:"   (  @@"`
	Range  *RangeList `parser:"    | @@"`
	Unit   AttrUnit   `parser:"      @@?"`
	Word   *Ident     `parser:"    | @@ ) )"`
	EndPos lexer.Position
}

// Flag is an endpoint attribute without a value: `nodelay`.
type Flag struct {
	Pos    lexer.Position
	Text   string `parser:"@'nodelay'"`
	EndPos lexer.Position
}

// Name is the attribute's name: the flag's or the key's.
func (a *EpAttr) Name() *Ident {
	if a.Flag != nil {
		return &Ident{Pos: a.Flag.Pos, Text: a.Flag.Text, EndPos: a.Flag.EndPos}
	}
	return a.Key
}

// Position is a position in the syntax tree, for packages that lower it.
type Position = lexer.Position

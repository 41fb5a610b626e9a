package pred

import (
	"errors"
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/dragonc/dragonc/internal/diag"
)

var exprLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
	{Name: "MAC", Pattern: `[0-9A-Fa-f]{1,2}(:[0-9A-Fa-f]{1,2}){5}`},
	{Name: "IP", Pattern: `[0-9]+(\.[0-9]+){3}`},
	{Name: "Hex", Pattern: `0[xX][0-9A-Fa-f]+`},
	{Name: "Number", Pattern: `[0-9]+`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*`},
	{Name: "Op", Pattern: `&&|\|\||==|!=|<=|>=|\.\.|[<>!&(){},/]`},
})

// The concrete syntax of expressions, lowered to Expr by build.
type xOr struct {
	Pos lexer.Position
	X   []*xAnd `parser:"@@ ( '||' @@ )*"`
}

type xAnd struct {
	X []*xUnary `parser:"@@ ( '&&' @@ )*"`
}

type xUnary struct {
	Pos  lexer.Position
	Not  *xUnary   `parser:"(  '!' @@"`
	Prim *xPrimary `parser:" | @@ )"`
}

type xPrimary struct {
	Pos   lexer.Position
	Group *xOr   `parser:"(  '(' @@ ')'"`
	Call  *xCall `parser:" | @@"`
	Cmp   *xCmp  `parser:" | @@ )"`
}

// xCall is a Unicorn term: and(...), or(...), not(x), pred(FIELD, VALUE).
type xCall struct {
	Pos  lexer.Position
	Fn   string  `parser:"@('and' | 'or' | 'not' | 'pred') '('"`
	Args []*xArg `parser:"( @@ ( ',' @@ )* )? ')'"`
}

// xArg is an argument of a Unicorn term: an expression or, inside pred(),
// a bare word or number.
type xArg struct {
	Pos  lexer.Position
	Expr *xOr `parser:"@@"`
}

type xCmp struct {
	Pos   lexer.Position
	Field string   `parser:"@Ident"`
	Mask  *xValue  `parser:"( '&' @@ )?"`
	Op    string   `parser:"( @('==' | '!=' | '<=' | '>=' | '<' | '>')"`
	Value *xValue  `parser:"  @@"`
	In    bool     `parser:"| @'in'"`
	Set   []*xItem `parser:"  ( '{' @@ ( ',' @@ )* '}'"`
	Range *xItem   `parser:"  | @@ ) )?"`
}

type xItem struct {
	Lo     *xValue `parser:"@@"`
	Hi     *xValue `parser:"( '..' @@"`
	Prefix *string `parser:"| '/' @Number )?"`
}

type xValue struct {
	Pos lexer.Position
	Tok string `parser:"@(MAC | IP | Hex | Number | Ident)"`
}

var exprParser = participle.MustBuild[xOr](
	participle.Lexer(exprLexer),
	participle.Elide("Whitespace"),
	participle.UseLookahead(3),
)

// Error is a predicate syntax or meaning error at a byte offset of the
// expression text.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// Parse reads a dragonc expression or a Unicorn term.
func Parse(src string) (Expr, error) {
	if off, deep := tooDeep(src); deep {
		return nil, &Error{Offset: off, Msg: fmt.Sprintf("the predicate nests deeper than %d levels of parentheses and negations", MaxNesting)}
	}
	ast, err := exprParser.ParseString("", src)
	if err != nil {
		var perr participle.Error
		if errors.As(err, &perr) {
			return nil, &Error{Offset: perr.Position().Offset, Msg: reword(perr.Message())}
		}
		return nil, &Error{Msg: err.Error()}
	}
	return ast.build()
}

// productionWords say what each production of the grammar is, as a user
// would: participle's messages name the production expected.
var productionWords = map[string]string{
	"XOr": "an expression", "XAnd": "an expression", "XUnary": "an expression", "XPrimary": "an expression",
	"XArg": "an argument", "XCmp": "a comparison such as udp.dport == 53", "XCall": "an expression",
	"XItem": "a value or a range", "XValue": "a value (a number, an address or a name)",
}

var expectedProduction = regexp.MustCompile(` \(expected (.*)\)$`)

// reword turns participle's message into the words of the predicate
// language: no token or production names.
func reword(msg string) string {
	if text, ok := strings.CutPrefix(strings.TrimPrefix(msg, "lexer: "), "invalid input text "); ok {
		rest, err := strconv.Unquote(text)
		if err != nil || rest == "" {
			return "unexpected character"
		}
		r, _ := utf8.DecodeRuneInString(rest)
		if r == '=' {
			return `"=" is no operator: compare with ==`
		}
		return fmt.Sprintf("unexpected character %q", string(r))
	}
	msg = strings.ReplaceAll(msg, `unexpected token "<EOF>"`, "unexpected end of expression")
	msg = strings.ReplaceAll(msg, "unexpected token ", "unexpected ")
	if m := expectedProduction.FindStringSubmatchIndex(msg); m != nil {
		want := msg[m[2]:m[3]]
		if w, ok := productionWords[want]; ok {
			want = w
		}
		msg = msg[:m[0]] + ": expected " + want
	}
	return msg
}

// MustParse is Parse for expressions known to be valid, such as the
// built-in protocol templates.
func MustParse(src string) Expr {
	e, err := Parse(src)
	if err != nil {
		panic(fmt.Sprintf("dragonc: internal error: predicate %q: %v", src, err))
	}
	return e
}

func (x *xOr) build() (Expr, error) {
	var out []Expr
	for _, a := range x.X {
		e, err := a.build()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return Or{X: out}, nil
}

func (x *xAnd) build() (Expr, error) {
	var out []Expr
	for _, u := range x.X {
		e, err := u.build()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return And{X: out}, nil
}

func (x *xUnary) build() (Expr, error) {
	if x.Not != nil {
		e, err := x.Not.build()
		if err != nil {
			return nil, err
		}
		return Not{X: e}, nil
	}
	p := x.Prim
	switch {
	case p.Group != nil:
		return p.Group.build()
	case p.Call != nil:
		return p.Call.build()
	}
	return p.Cmp.build()
}

func (c *xCall) build() (Expr, error) {
	switch c.Fn {
	case "pred":
		if len(c.Args) != 2 {
			return nil, &Error{Offset: c.Pos.Offset, Msg: "pred() takes two arguments: a field or node, and a value or port"}
		}
		name, ok1 := c.Args[0].word()
		val, ok2 := c.Args[1].word()
		if !ok1 || !ok2 {
			return nil, &Error{Offset: c.Pos.Offset, Msg: "pred() arguments must be plain names or numbers"}
		}
		if f, ok := unicornFields[name]; ok {
			v, known := unicornValues[val]
			if !known {
				n, err := parseNumber(val)
				if err != nil {
					return opaqueValue(name, f, val), nil
				}
				v = n
			}
			return Cmp{Field: f, ID: Fields[f].ID, Op: Eq, Value: v}, nil
		}
		return Atom{Name: name, Value: val}, nil
	case "not":
		if len(c.Args) != 1 {
			return nil, &Error{Offset: c.Pos.Offset, Msg: "not() takes one argument"}
		}
		e, err := c.Args[0].Expr.build()
		if err != nil {
			return nil, err
		}
		return Not{X: e}, nil
	}
	var xs []Expr
	for _, a := range c.Args {
		e, err := a.Expr.build()
		if err != nil {
			return nil, err
		}
		xs = append(xs, e)
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	if c.Fn == "and" {
		return And{X: xs}, nil
	}
	return Or{X: xs}, nil
}

// word returns the argument when it is a single bare name or number.
func (a *xArg) word() (string, bool) {
	if len(a.Expr.X) != 1 || len(a.Expr.X[0].X) != 1 {
		return "", false
	}
	u := a.Expr.X[0].X[0]
	if u.Prim == nil || u.Prim.Cmp == nil {
		return "", false
	}
	c := u.Prim.Cmp
	if c.Mask != nil || c.Op != "" || c.In {
		return "", false
	}
	return c.Field, true
}

func (c *xCmp) build() (Expr, error) {
	switch c.Field {
	case "true":
		if c.Op == "" && !c.In && c.Mask == nil {
			return Const(true), nil
		}
	case "false":
		if c.Op == "" && !c.In && c.Mask == nil {
			return Const(false), nil
		}
	}
	info, ok := Fields[c.Field]
	if !ok {
		return nil, &Error{Offset: c.Pos.Offset, Msg: fmt.Sprintf("unknown field %q%s", c.Field, suggestField(c.Field))}
	}
	out := Cmp{Field: c.Field, ID: info.ID}
	if c.Mask != nil {
		m, err := c.Mask.value(info)
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return nil, &Error{Offset: c.Mask.Pos.Offset, Msg: "a mask of 0 matches nothing useful"}
		}
		out.Mask = m
	}
	switch {
	case c.Op != "":
		out.Op = map[string]Op{"==": Eq, "!=": Ne, "<": Lt, "<=": Le, ">": Gt, ">=": Ge}[c.Op]
		v, err := c.Value.value(info)
		if err != nil {
			return nil, err
		}
		out.Value = v
	case c.In:
		items := c.Set
		if c.Range != nil {
			items = []*xItem{c.Range}
		}
		for _, it := range items {
			r, err := it.rng(info)
			if err != nil {
				return nil, err
			}
			out.Ranges = append(out.Ranges, r)
		}
		out.Op = In
		out.Ranges = NormRanges(out.Ranges)
	default:
		// A bare field is a truth test: `udp.csum_ok` means `udp.csum_ok != 0`.
		out.Op = Ne
	}
	return out, nil
}

func (it *xItem) rng(info FieldInfo) (Range, error) {
	lo, err := it.Lo.value(info)
	if err != nil {
		return Range{}, err
	}
	switch {
	case it.Hi != nil:
		hi, err := it.Hi.value(info)
		if err != nil {
			return Range{}, err
		}
		if hi < lo {
			return Range{}, &Error{Offset: it.Hi.Pos.Offset, Msg: "range ends below its start"}
		}
		return Range{lo, hi}, nil
	case it.Prefix != nil:
		n, err := strconv.Atoi(*it.Prefix)
		if err != nil || n < 0 || n > info.Bits {
			return Range{}, &Error{Offset: it.Lo.Pos.Offset, Msg: fmt.Sprintf("prefix length must be 0..%d", info.Bits)}
		}
		host := uint64(0)
		if n < info.Bits {
			host = (uint64(1) << uint(info.Bits-n)) - 1
		}
		return Range{lo &^ host, lo | host}, nil
	}
	return Range{lo, lo}, nil
}

func (v *xValue) value(info FieldInfo) (uint64, error) {
	n, err := parseNumber(v.Tok)
	if err != nil {
		if c, ok := Constants[v.Tok]; ok {
			n, err = c, nil
		}
	}
	if err != nil {
		return 0, &Error{Offset: v.Pos.Offset, Msg: err.Error()}
	}
	if info.Bits < 64 && bits.Len64(n) > info.Bits {
		return 0, &Error{Offset: v.Pos.Offset, Msg: fmt.Sprintf("%s does not fit in %s (%d bits)", v.Tok, info.Name, info.Bits)}
	}
	return n, nil
}

// parseNumber reads a decimal, 0x hexadecimal, dotted-quad or MAC literal.
func parseNumber(s string) (uint64, error) {
	switch {
	case strings.Count(s, ":") == 5:
		var v uint64
		for _, p := range strings.Split(s, ":") {
			b, err := strconv.ParseUint(p, 16, 8)
			if err != nil {
				return 0, fmt.Errorf("malformed MAC address %q", s)
			}
			v = v<<8 | b
		}
		return v, nil
	case strings.Count(s, ".") == 3:
		var v uint64
		for _, p := range strings.Split(s, ".") {
			b, err := strconv.ParseUint(p, 10, 8)
			if err != nil {
				return 0, fmt.Errorf("malformed IPv4 address %q", s)
			}
			v = v<<8 | b
		}
		return v, nil
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		return strconv.ParseUint(s[2:], 16, 64)
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("unknown constant %q", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %q is out of range", s)
	}
	return n, nil
}

func suggestField(name string) string {
	if best := diag.Closest(name, FieldNames()); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// MaxNesting bounds the parentheses and negations of one predicate: the
// parser and every later pass recurse once per level.
const MaxNesting = 256

// tooDeep reports where a predicate first nests deeper than MaxNesting:
// open parentheses plus the negations ("!", not "!=") in force.
func tooDeep(src string) (int, bool) {
	var stack []int // negations in force at each open parenthesis
	neg := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '(':
			stack = append(stack, neg)
		case c == ')':
			if n := len(stack); n > 0 {
				neg = stack[n-1]
				stack = stack[:n-1]
			}
		case c == '!' && (i+1 >= len(src) || src[i+1] != '='):
			neg++
		case c == ' ' || c == '\t' || c == '\n':
		default:
			if len(stack) == 0 {
				neg = 0
			} else {
				neg = stack[len(stack)-1]
			}
			continue
		}
		if len(stack)+neg > MaxNesting {
			return i, true
		}
	}
	return 0, false
}

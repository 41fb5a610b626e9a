package plan

import (
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The plan's writer follows from its declaration: the struct types and
// their json tags above are the schema, read once by reflection into an
// encoder per type, which then writes json.MarshalIndent(p, "", "  ")'s
// bytes without MarshalIndent's costs: no interface boxing per element,
// no second pass to indent, and the output flushed as it grows, so a plan
// of 100,000 endpoints is never held twice in memory.
// TestWriteJSONIsMarshalIndent holds it to MarshalIndent's bytes.

// encoder appends v to e.b; depth is the indentation of the line v's
// text starts on.
type encoder func(e *encodeState, v reflect.Value, depth int)

// encodeState is one write: the text not yet flushed, where it goes, and
// the first error.
type encodeState struct {
	b   []byte
	w   io.Writer
	err error
}

// flushAt is how much text a write holds before it passes it on.
const flushAt = 64 << 10

func (e *encodeState) flush() {
	if e.err == nil && len(e.b) > 0 {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

// indents is a newline and the indentation of the deepest line a plan has
// and more.
const indents = "\n                                "

// newline starts a line at depth.
func (e *encodeState) newline(depth int) {
	if n := 1 + 2*depth; n <= len(indents) {
		e.b = append(e.b, indents[:n]...)
		return
	}
	e.b = append(e.b, '\n')
	for range depth {
		e.b = append(e.b, "  "...)
	}
}

// planEncoder writes a Plan; built once, when the package loads, so a
// type the encoder does not know fails every test at once.
var planEncoder = newEncoder(reflect.TypeFor[Plan]())

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// newEncoder builds the encoder of a type of the schema, as encoding/json
// would write it.
func newEncoder(t reflect.Type) encoder {
	if t.Implements(textMarshaler) {
		return func(e *encodeState, v reflect.Value, _ int) {
			text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
			if err != nil && e.err == nil {
				e.err = fmt.Errorf("json: error calling MarshalText for type %s: %w", t, err) // encoding/json's words
			}
			e.b = appendString(e.b, string(text))
		}
	}
	switch t.Kind() {
	case reflect.String:
		return func(e *encodeState, v reflect.Value, _ int) { e.b = appendString(e.b, v.String()) }
	case reflect.Bool:
		return func(e *encodeState, v reflect.Value, _ int) { e.b = strconv.AppendBool(e.b, v.Bool()) }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(e *encodeState, v reflect.Value, _ int) { e.b = strconv.AppendInt(e.b, v.Int(), 10) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return func(e *encodeState, v reflect.Value, _ int) { e.b = strconv.AppendUint(e.b, v.Uint(), 10) }
	case reflect.Float64:
		return encodeFloat
	case reflect.Pointer:
		elem := newEncoder(t.Elem())
		return func(e *encodeState, v reflect.Value, depth int) {
			if v.IsNil() {
				e.b = append(e.b, "null"...)
				return
			}
			elem(e, v.Elem(), depth)
		}
	case reflect.Slice:
		return sliceEncoder(t)
	case reflect.Map:
		return mapEncoder(t)
	case reflect.Struct:
		return structEncoder(t)
	}
	panic(fmt.Sprintf("plan: the writer has no encoding for %s, a %s", t, t.Kind()))
}

// encodeFloat writes a float64 as encoding/json does: the shortest
// representation, in exponent form below 1e-6 and from 1e21, with a
// one-digit negative exponent written without its zero (1e-7, not
// 1e-07); NaN and the infinities are an error.
func encodeFloat(e *encodeState, v reflect.Value, _ int) {
	f := v.Float()
	if math.IsInf(f, 0) || math.IsNaN(f) {
		if e.err == nil {
			e.err = &json.UnsupportedValueError{Value: v, Str: strconv.FormatFloat(f, 'g', -1, 64)}
		}
		e.b = append(e.b, '0')
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if n := len(e.b); format == 'e' && n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
		e.b[n-2] = e.b[n-1]
		e.b = e.b[:n-1]
	}
}

// list writes the n items of a list or map, one per line at depth+1,
// between open and close: item writes item i. A nil v is null, and an
// empty one open and close on one line.
func (e *encodeState) list(v reflect.Value, n, depth int, open, close byte, item func(i int)) {
	switch {
	case v.IsNil():
		e.b = append(e.b, "null"...)
		return
	case n == 0:
		e.b = append(e.b, open, close)
		return
	}
	e.b = append(e.b, open)
	for i := range n {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.newline(depth + 1)
		item(i)
		if len(e.b) > flushAt {
			e.flush()
		}
	}
	e.newline(depth)
	e.b = append(e.b, close)
}

// sliceEncoder writes a slice as a list.
func sliceEncoder(t reflect.Type) encoder {
	elem := newEncoder(t.Elem())
	return func(e *encodeState, v reflect.Value, depth int) {
		e.list(v, v.Len(), depth, '[', ']', func(i int) { elem(e, v.Index(i), depth+1) })
	}
}

// mapEncoder writes a map with string keys as an object, in key order.
func mapEncoder(t reflect.Type) encoder {
	if t.Key().Kind() != reflect.String {
		panic(fmt.Sprintf("plan: the writer has no encoding for %s: map keys are strings", t))
	}
	elem := newEncoder(t.Elem())
	return func(e *encodeState, v reflect.Value, depth int) {
		// The entries copied out once, keys and values side by side, then
		// written in key order: MapKeys and MapIndex would allocate per
		// entry.
		n := v.Len()
		var keys []string
		var vals reflect.Value
		var order []int
		if n > 0 {
			keys = make([]string, 0, n)
			vals = reflect.MakeSlice(reflect.SliceOf(t.Elem()), n, n)
			key := reflect.New(t.Key()).Elem()
			for it, i := v.MapRange(), 0; it.Next(); i++ {
				key.SetIterKey(it)
				keys = append(keys, key.String())
				vals.Index(i).SetIterValue(it)
			}
			order = make([]int, n)
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
		}
		e.list(v, n, depth, '{', '}', func(i int) {
			k := order[i]
			e.b = append(appendString(e.b, keys[k]), ": "...)
			elem(e, vals.Index(k), depth+1)
		})
	}
}

// field is one field of a struct as its json tag declares it.
type field struct {
	index     int
	key       string // `"name": `
	omitEmpty bool
	enc       encoder
}

// structEncoder writes a struct's exported fields in declaration order,
// each under its json tag's name, leaving out an empty omitempty one.
func structEncoder(t reflect.Type) encoder {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		if sf.Anonymous {
			panic(fmt.Sprintf("plan: the writer has no encoding for %s's embedded field %s", t, sf.Name))
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		if opts != "" && opts != "omitempty" {
			panic(fmt.Sprintf("plan: the writer has no encoding for %s.%s's json option %q", t, sf.Name, opts))
		}
		fields = append(fields, field{index: i, key: string(appendString(nil, name)) + ": ", omitEmpty: opts == "omitempty", enc: newEncoder(sf.Type)})
	}
	return func(e *encodeState, v reflect.Value, depth int) {
		e.b = append(e.b, '{')
		first := true
		for _, f := range fields {
			fv := v.Field(f.index)
			if f.omitEmpty && empty(fv) {
				continue
			}
			if !first {
				e.b = append(e.b, ',')
			}
			first = false
			e.newline(depth + 1)
			e.b = append(e.b, f.key...)
			f.enc(e, fv, depth+1)
		}
		if !first {
			e.newline(depth)
		}
		e.b = append(e.b, '}')
	}
}

// empty is encoding/json's test for omitempty.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

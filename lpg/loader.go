package lpg

import (
	"bytes"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
)

// Loader loads one stack file again and again, as a run reloads it
// (issue 39: a 10,000-endpoint file whose one endpoint changes). Each
// load returns what LoadStack returns for the same bytes, and reads
// again only the endpoints that changed when it can. It keeps the last
// file that loaded without a diagnostic (a file with errors in between
// does not replace it), with its endpoints and the indexes of the checks
// that span endpoints (identifiers, which stand for names too, and what
// each endpoint receives). A load of bytes that differ from it in
// endpoint statements only (added, removed or edited, with the
// whitespace and comments between them) parses the statements in the
// changed range with the file's parser (dsl.ParseStackItems), lowers
// them, and checks them against the indexes; anything else (a change
// elsewhere, a syntax error, any diagnostic, even a warning) reads the
// whole file with LoadStack, which says what is wrong. TestLoaderAgrees
// and FuzzLoader compare the two on random edits.
//
// A Loader is safe for concurrent use. The bytes given to Load must not
// change afterwards (a Stack's File and its strings hold them), nor the
// endpoints of the stacks it returns (their list or values): the next
// load copies them (nothing in dragonc changes a stack's endpoints in
// place; Live.Add, say, serves a copy with one more).
type Loader struct {
	mu   sync.Mutex
	last *loaded
	// Partial and Whole count the loads that read only a changed range
	// and those that read the whole file (read them while no load runs).
	Partial, Whole int
}

// loaded is a file that loaded without a diagnostic.
type loaded struct {
	name  string
	src   []byte
	st    *Stack      // the stack, without its endpoints
	eps   []*Endpoint // its endpoints
	items []itemSpan  // the stack's items, in order
	close int         // the offset of the stack's closing brace
	// The indexes of checkNames and checkConflicts (the values of keys
	// are not read; they hold no endpoint of an older file). A name
	// taken is an identifier taken: the identifiers index both.
	idents map[string]bool
	keys   map[conflictKey]int
}

// itemSpan is one item of a stack: its bytes, and the endpoints it
// declares (-1 for an item that is no endpoint statement).
type itemSpan struct {
	start, end int32 // a file is at most dsl.MaxSource bytes
	eps        int32
}

// ReadFile reads the stack file path and loads it (Load); the error is a
// file that cannot be read. A run reads its stack file once as it starts,
// and again at each reload, which then reads only what changed.
func (ld *Loader) ReadFile(path string) (*Stack, diag.List, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	st, diags := ld.Load(path, src)
	return st, diags, nil
}

// Load parses and checks src, the stack file name, as LoadStack does.
func (ld *Loader) Load(name string, src []byte) (*Stack, diag.List) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if st, ok := ld.partial(name, src); ok {
		ld.Partial++
		return st, nil
	}
	ld.Whole++
	st, diags, l := loadStack(name, src)
	if st == nil || len(diags) > 0 {
		// The last clean file stays the one the next load is compared
		// with: the file put right is read in part.
		return st, diags
	}
	last := &loaded{name: name, src: src, st: withoutEndpoints(st), eps: st.Endpoints,
		close: l.src.AST.Stack.EndPos.Offset - 1, idents: l.idents, keys: l.keys}
	n := 0
	for _, it := range l.src.AST.Stack.Items {
		sp := itemSpan{start: int32(it.Pos.Offset), end: int32(it.EndPos.Offset), eps: -1}
		if it.Endpoint != nil {
			// Lowering appends an item's endpoints in order.
			sp.eps = int32(endpointsOf(st.Endpoints[n:], sp))
			n += int(sp.eps)
		}
		last.items = append(last.items, sp)
	}
	ld.last = nil
	if n == len(st.Endpoints) {
		ld.last = last
	}
	return st, diags
}

// endpointsOf counts the endpoints at the start of eps that item sp
// declares.
func endpointsOf(eps []*Endpoint, sp itemSpan) int {
	k := 0
	for k < len(eps) && eps[k].Pos.Start == int(sp.start) && eps[k].Pos.End == int(sp.end) {
		k++
	}
	return k
}

// withoutEndpoints copies st but its endpoints, keeping nothing a
// caller can change.
func withoutEndpoints(st *Stack) *Stack {
	c := cloneStack(st)
	c.Endpoints = nil
	return &c
}

// cloneStack copies st, its interfaces and cores (not its endpoints).
func cloneStack(st *Stack) Stack {
	c := *st
	c.Interfaces = slices.Clone(st.Interfaces)
	for i := range c.Interfaces {
		c.Interfaces[i].IPs = slices.Clone(c.Interfaces[i].IPs)
	}
	c.Cores = slices.Clone(st.Cores)
	return c
}

// partial loads src from the last file loaded, reading only the range
// that changed, when that holds endpoint statements only; false when it
// cannot, or finds anything to say.
func (ld *Loader) partial(name string, src []byte) (*Stack, bool) {
	old := ld.last
	if old == nil || old.name != name {
		return nil, false
	}
	a, b := old.src, src
	// The bytes both share at their start (p) and end (q): the change is
	// [p, len(a)-q) of a, [p, len(b)-q) of b.
	n := min(len(a), len(b))
	p := 0
	for p+block <= n && bytes.Equal(a[p:p+block], b[p:p+block]) {
		p += block
	}
	for p < n && a[p] == b[p] {
		p++
	}
	q := 0
	for q+block <= n-p && bytes.Equal(a[len(a)-q-block:len(a)-q], b[len(b)-q-block:len(b)-q]) {
		q += block
	}
	for q < n-p && a[len(a)-1-q] == b[len(b)-1-q] {
		q++
	}
	oldEnd := len(a) - q
	if p == len(a) && p == len(b) {
		p, oldEnd = old.close, old.close // the same bytes: nothing read again
	}
	// The range read again: from the end of the last item before the
	// change to the start of the first after it (or the stack's closing
	// brace), with the statements, whitespace and comments between.
	items := old.items
	j := sort.Search(len(items), func(i int) bool { return int(items[i].end) > p }) - 1
	m := sort.Search(len(items), func(i int) bool { return int(items[i].start) >= oldEnd })
	if j < 0 || m == len(items) && old.close < oldEnd {
		return nil, false // a change before the first item's end, or in the brace
	}
	lo, hi := 0, 0 // the endpoints of items j+1 .. m-1
	for k := range m {
		if k > j && items[k].eps < 0 {
			return nil, false // not an endpoint statement
		}
		if k <= j && items[k].eps > 0 {
			lo += int(items[k].eps)
		}
		if items[k].eps > 0 {
			hi += int(items[k].eps)
		}
	}
	from, oldTo := int(items[j].end), old.close
	if m < len(items) {
		oldTo = int(items[m].start)
	}
	// Item j's last token ends at from in the new file as in the old:
	// both have the same bytes up to from, and it is a "}" (a token of
	// its own) or followed by a blank in both. The token after it, in
	// both, starts an item or closes the stack (ParseStackItems and the
	// token at to see to that), and no item goes on with such a token
	// (each ends with "}", or goes on with ",", "..", "{", listen, flow
	// or a number): item j reads as it did.
	if from >= len(a) || from >= len(b) || a[from-1] != '}' && (!dsl.IsSpace(a[from]) || !dsl.IsSpace(b[from])) {
		return nil, false
	}
	delta := len(b) - len(a)
	to := oldTo + delta
	s, its, ok := dsl.ParseStackItems(name, src, from, to)
	if !ok {
		return nil, false
	}
	l := &stackLowerer{src: s, st: &Stack{Interfaces: old.st.Interfaces, Cores: old.st.Cores}}
	spans := make([]itemSpan, 0, len(its))
	for _, it := range its {
		if it.Endpoint == nil {
			return nil, false
		}
		n := len(l.st.Endpoints)
		l.endpoint(it, it.Endpoint)
		spans = append(spans, itemSpan{start: int32(it.Pos.Offset), end: int32(it.EndPos.Offset), eps: int32(len(l.st.Endpoints) - n)})
	}
	if len(l.diags) > 0 {
		return nil, false
	}
	added := l.st.Endpoints
	for _, e := range added {
		// Strings of their own: the file's text is dropped once a newer
		// one is loaded (an endpoint kept from it must not keep it).
		e.Name, e.App = strings.Clone(e.Name), strings.Clone(e.App)
		if i := slices.Index(protos, e.Proto); i >= 0 {
			e.Proto = protos[i]
		}
	}
	// The checks of checkNames and checkConflicts, by index: an
	// identifier (so a name) or key the stack has is taken unless its
	// endpoint goes. The file loaded had no diagnostic: each endpoint's
	// identifier is its name's (Sanitize).
	removed := old.eps[lo:hi]
	goneIdents := make(map[string]bool, len(removed))
	goneKeys := make(map[conflictKey]bool, len(removed))
	for _, e := range removed {
		goneIdents[e.Ident], goneKeys[conflictKeyOf(e)] = true, true
	}
	newIdents := make(map[string]bool, len(added))
	newKeys := make(map[conflictKey]bool, len(added))
	for _, e := range added {
		e.Ident = Sanitize(e.Name)
		key := conflictKeyOf(e)
		if old.idents[e.Ident] && !goneIdents[e.Ident] || newIdents[e.Ident] {
			return nil, false
		}
		if _, ok := old.keys[key]; ok && !goneKeys[key] || newKeys[key] {
			return nil, false
		}
		newIdents[e.Ident], newKeys[key] = true, true
	}
	// The endpoints, new values in one block (each names the new file):
	// those before the range, the range's, and those after it, moved by
	// delta bytes.
	count := len(old.eps) - (hi - lo) + len(added)
	vals := make([]Endpoint, count)
	eps := make([]*Endpoint, count)
	for i := range vals {
		switch {
		case i < lo:
			vals[i] = *old.eps[i]
		case i < lo+len(added):
			vals[i] = *added[i-lo]
		default:
			vals[i] = *old.eps[i-len(added)+hi-lo]
			vals[i].Pos.Start += delta
			vals[i].Pos.End += delta
		}
		vals[i].Pos.File = s.File
		eps[i] = &vals[i]
	}
	st := cloneStack(old.st)
	st.File = s.File
	st.Endpoints = eps
	if len(st.Shadowed()) > 0 {
		return nil, false // checkShadowed's warning
	}
	// The file loaded: it is the last.
	for _, e := range removed {
		delete(old.idents, e.Ident)
		delete(old.keys, conflictKeyOf(e))
	}
	for _, e := range added {
		old.idents[e.Ident], old.keys[conflictKeyOf(e)] = true, -1
	}
	next := make([]itemSpan, 0, len(items)-(m-j-1)+len(spans))
	next = append(next, items[:j+1]...)
	next = append(next, spans...)
	for _, sp := range items[m:] {
		sp.start += int32(delta)
		sp.end += int32(delta)
		next = append(next, sp)
	}
	old.src, old.eps, old.items, old.close = src, eps, next, old.close+delta
	old.st = withoutEndpoints(&st)
	return &st, true
}

// protos are the protocols an endpoint has.
var protos = []Proto{UDP, TCP, OpenMX}

// block is how many bytes partial compares at once.
const block = 4096

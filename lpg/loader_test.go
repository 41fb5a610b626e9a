package lpg

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
)

// loaderBase is a stack with every kind of item and endpoint, comments
// and blank lines, and n UDP listeners.
func loaderBase(n int) string {
	var b strings.Builder
	b.WriteString("// a stack to edit\nstack edits {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 ip 10.0.0.2/24 }\n    cores 0..3\n\n")
	b.WriteString("    endpoint web tcp listen *:80 { app \"nginx\" }\n    endpoint ssh tcp flow 10.0.0.1:22 -> 10.0.0.7:51000\n")
	b.WriteString("    endpoint shard udp listen 10.0.0.1:20000..20009 // ten ports\n    endpoint r0 openmx 0 { app \"mpi\" core 2 message 4MiB }\n")
	for i := range n {
		if i%7 == 3 {
			fmt.Fprintf(&b, "    /* listener %d */\n", i)
		}
		if i%5 == 1 {
			fmt.Fprintf(&b, "    endpoint e%d udp listen *:%d\n", i, 30000+i) // ends with a number
			continue
		}
		fmt.Fprintf(&b, "    endpoint e%d udp listen *:%d { app \"echo\" rate %dkpps }\n", i, 30000+i, i+1)
	}
	b.WriteString("    service icmp-echo\n    service arp\n}\n// the end\n")
	return b.String()
}

// snippets are what random edits insert: whole statements, pieces of
// them, and the tokens that change how the rest of a file reads.
var snippets = []string{
	"    endpoint x%d udp listen *:%d { app \"echo\" }\n",
	"    endpoint x%d udp listen *:%d\n",
	"    endpoint x%d tcp listen 10.0.0.2:%d { nodelay }\n",
	"    endpoint x%d udp listen 10.0.0.1:%d..40010\n",
	"    endpoint x%d openmx 7\n",
	"    endpoint e1 udp listen *:%d%d\n",                                                // a name taken
	"    endpoint x%d udp listen *:30002 // %d\n",                                        // a port taken
	"    endpoint x-%d udp listen *:%d\n    endpoint x_%d udp listen *:%d\n",             // one identifier
	"    endpoint x%d tcp listen 10.0.0.1:80\n    endpoint x%d tcp listen 10.0.0.2:80\n", // web shadowed
	"    endpoint x%d udp listen 10.9.9.9:%d\n",                                          // not our address
	"    endpoint x%d udp listen *:%d { core 9 }\n",
	"endpoint x%d udp listen *:%d ", "9\n    endpoint x%d udp listen *:%d",
	"    service arp\n", "    cores 0..1\n",
	"// a comment %d %d\n", "/* a block %d %d */", "/*", "*/", "\"", "\"x\"", "{", "}", "endpoint", " ", "\n",
	"x", "9", ":", "..", "rate 5kpps ", "app \"z\" ", "listen", "\xff",
}

// files compares files by name and text (a file's line table is made
// when first asked for).
var files = cmp.Comparer(func(a, b *diag.File) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Name == b.Name && string(a.Src) == string(b.Src)
})

// TestLoaderAgrees loads random edits of a stack with one Loader and
// compares each with LoadStack: the same stack (positions included) or
// the same diagnostics, at the same places. Most edits must take the
// partial path.
func TestLoaderAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	good := loaderBase(60)
	var ld Loader
	check := func(step int, src string) bool {
		t.Helper()
		want, wantDiags := LoadStack("edits.lpg", []byte(src))
		got, gotDiags := ld.Load("edits.lpg", []byte(src))
		if d := cmp.Diff(want, got, files); d != "" {
			t.Fatalf("step %d: the Loader's stack differs from LoadStack's (-want +got):\n%s\nsource:\n%s", step, d, src)
		}
		if d := cmp.Diff(wantDiags, gotDiags, files); d != "" || wantDiags.Error() != gotDiags.Error() {
			t.Fatalf("step %d: the Loader's diagnostics differ from LoadStack's (-want +got):\n%s\n%s\n%s", step, d, wantDiags, gotDiags)
		}
		return want != nil && len(wantDiags) == 0
	}
	check(0, good)
	const steps = 3000
	cur, clean := good, 0
	for step := 1; step <= steps; step++ {
		src := edit(rng, cur)
		switch {
		case check(step, src):
			good, cur = src, src
			clean++
		case rng.IntN(4) == 0:
			cur = src // a file with errors, edited on
		default:
			cur = good
		}
	}
	t.Logf("%d partial loads, %d whole; %d clean", ld.Partial, ld.Whole, clean)
	if ld.Partial < clean/2 {
		t.Errorf("only %d of %d clean loads were partial", ld.Partial, clean)
	}
}

// edit makes one random change of src: a snippet inserted (at the start
// or end of a line, or anywhere), a range replaced, a line removed or
// duplicated, anywhere, at the file's start and end included.
func edit(rng *rand.Rand, src string) string {
	at := func() int {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return len(src)
		}
		return rng.IntN(len(src) + 1)
	}
	lineStart := func() int {
		i := at()
		return strings.LastIndexByte(src[:i], '\n') + 1
	}
	snippet := func() string {
		s := snippets[rng.IntN(len(snippets))]
		n := strings.Count(s, "%d")
		args := make([]any, n)
		for i := range args {
			args[i] = 40100 + rng.IntN(50)
		}
		return fmt.Sprintf(s, args...)
	}
	switch rng.IntN(7) {
	case 6: // a snippet at the end of a line, after a statement's last token
		i := lineStart()
		if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
			i += j
		}
		return src[:i] + snippet() + src[i:]
	case 0, 1: // a snippet at the start of a line
		i := lineStart()
		return src[:i] + snippet() + src[i:]
	case 2: // a snippet anywhere
		i := at()
		return src[:i] + snippet() + src[i:]
	case 3: // a line removed
		i := lineStart()
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return src[:i]
		}
		return src[:i] + src[i+j+1:]
	case 4: // a range replaced
		i := at()
		j := min(len(src), i+rng.IntN(40))
		return src[:i] + snippet() + src[j:]
	default: // a line duplicated with a new name and port
		i := lineStart()
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return src
		}
		line := src[i : i+j+1]
		line = strings.Replace(line, "endpoint e", fmt.Sprintf("endpoint d%d_", rng.IntN(1000)), 1)
		line = strings.Replace(line, ":3", ":4", 1)
		return src[:i] + line + src[i:]
	}
}

// TestLoaderEdges loads edits that test the edges of the partial path
// (the changed range's ends, tokens that run into the next, comments and
// strings left open, errors) and compares each with LoadStack.
func TestLoaderEdges(t *testing.T) {
	base := "// edges\nstack edges {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n    cores 0..1\n" +
		"    endpoint a udp listen *:1000 { app \"echo\" }\n    // between\n    endpoint b udp listen *:1001\n" +
		"    endpoint b_2 udp listen *:1004\n" +
		"    endpoint c udp listen *:1002 { app \"c\" }\n    service icmp-echo\n    service arp\n}\n"
	for _, c := range []struct {
		name, old, new string
		partial        bool // the load must be partial
	}{
		{"appended", "    service icmp-echo", "    endpoint d udp listen *:1003\n    service icmp-echo", true},
		{"appended last", "\n}\n", "\n    endpoint d udp listen *:1003\n}\n", true},
		{"removed", "    endpoint b udp listen *:1001\n", "", true},
		{"first removed", "    endpoint a udp listen *:1000 { app \"echo\" }\n", "", true},
		{"inserted first", "    endpoint a", "    endpoint z udp listen *:999\n    endpoint a", true},
		{"body", `{ app "c" }`, `{ app "see" rate 1kpps }`, true},
		{"port", "*:1001", "*:2001", true},
		{"form feed after", "*:1001\n", "*:1001\f\n    endpoint d udp listen *:1003\v\n", true},
		{"comment", "// between", "// in between", true},
		{"nothing", "", "", true},
		{"glued to a number", "*:1001\n", "*:1001endpoint d udp listen *:1003\n", false},
		{"glued to a word", "service icmp-echo\n", "service icmp-echoendpoint d udp listen *:1003\n", false},
		{"after a brace", "{ app \"c\" }\n", "{ app \"c\" }endpoint d udp listen *:1003\n", true},
		{"comment opened", "// between", "/* between", false},
		{"comment across", "// between\n    endpoint b udp listen *:1001\n", "/* between\n    endpoint b udp listen *:1001 */\n", false},
		{"string opened", `{ app "c" }`, `{ app "c }`, false},
		{"syntax error", "*:1001", "*:", false},
		{"bad attribute", `{ app "c" }`, `{ colour "c" }`, false},
		{"name taken", "endpoint c udp", "endpoint a udp", false},
		{"port taken", "*:1002", "*:1000", false},
		{"identifier taken", "endpoint c udp", "endpoint b-2 udp", false},
		{"identifiers alike", "endpoint c udp", "endpoint c-x udp listen *:1100\n    endpoint c_x udp", false},
		{"ports alike", "endpoint c udp", "endpoint cx udp listen *:1002\n    endpoint c udp", false},
		{"not a statement", "    endpoint b", "    interface eth1 { mac 00:1b:21:3a:4b:5d }\n    endpoint b", false},
		{"start", "// edges", "// the edges", false},
		{"end", "}\n", "}\n// end\n", false},
		{"interface", "10.0.0.1/24", "10.0.0.2/24", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.old) {
				t.Fatalf("%q is not in the stack", c.old)
			}
			src := strings.Replace(base, c.old, c.new, 1)
			var ld Loader
			if st, diags := ld.Load("edges.lpg", []byte(base)); st == nil || len(diags) > 0 {
				t.Fatal(diags)
			}
			want, wantDiags := LoadStack("edges.lpg", []byte(src))
			got, gotDiags := ld.Load("edges.lpg", []byte(src))
			if d := cmp.Diff(want, got, files); d != "" {
				t.Errorf("the Loader's stack differs from LoadStack's (-want +got):\n%s", d)
			}
			if wantDiags.Error() != gotDiags.Error() {
				t.Errorf("diagnostics: %s, want %s", gotDiags, wantDiags)
			}
			if c.partial && ld.Partial != 1 {
				t.Errorf("the load was not partial")
			}
			if want == nil && ld.Partial != 0 {
				t.Errorf("a file with errors was loaded in part")
			}
			// The file is loaded again, in part, after one with errors.
			if got, _ := ld.Load("edges.lpg", []byte(base)); got == nil || want == nil && ld.Partial != 1 {
				t.Errorf("the file put right: %v, %d partial", got != nil, ld.Partial)
			}
		})
	}
}

// An endpoint a partial load adds holds no string of the file it was
// read from: the endpoints that stay from load to load would otherwise
// keep every version of the file.
func TestLoaderKeepsNoSource(t *testing.T) {
	var ld Loader
	base := loaderBase(3)
	ld.Load("keep.lpg", []byte(base))
	src := []byte(strings.Replace(base, "    service arp", "    endpoint added udp listen *:40100 { app \"added-app\" }\n    service arp", 1))
	st, diags := ld.Load("keep.lpg", src)
	if st == nil || ld.Partial != 1 {
		t.Fatalf("not loaded in part: %v", diags)
	}
	e := st.Endpoints[len(st.Endpoints)-1]
	in := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(unsafe.SliceData(src)))
		return p >= start && p < start+uintptr(len(src))
	}
	if e.Name != "added" || in(e.Name) || in(e.App) || in(string(e.Proto)) || in(string(e.Class)) || in(e.Ident) {
		t.Errorf("endpoint %s (app %s) holds the file's bytes", e.Name, e.App)
	}
}

// FuzzLoader edits a stack (at, cut bytes removed, then put inserted)
// and compares the Loader's load of it with LoadStack's.
func FuzzLoader(f *testing.F) {
	base := loaderBase(8)
	f.Add(uint16(strings.Index(base, "    service arp")), uint8(0), "    endpoint x udp listen *:40100\n")
	f.Add(uint16(strings.Index(base, "    endpoint e3")), uint8(60), "")
	f.Add(uint16(strings.Index(base, "rate 1kpps")), uint8(10), "app \"z\" ")
	f.Add(uint16(strings.Index(base, "/* listener")), uint8(2), "//")
	f.Add(uint16(len(base)), uint8(0), "// end")
	// Hostile edits: CRLF and form feeds, a brace or comment that
	// changes how the rest reads, names that collide with a range's
	// members, an interface or a service, a port inside another
	// endpoint's range, a name that is not ASCII.
	at := uint16(strings.Index(base, "    service arp"))
	for _, put := range []string{
		"\r\n    endpoint x udp listen *:40100\r\n", "\f\vendpoint x udp listen *:40100\f\n", "}\n", "    }\n    endpoint x udp listen *:40100\n",
		"/* ", "    endpoint x udp listen *:40100 { app \"x\n", "    endpoint x udp listen 10.0.0.1:20005\n", "    endpoint x udp listen 10.0.0.1:29990..30003\n",
		"    endpoint shard-20003 udp listen *:40100\n", "    endpoint shard_20003 udp listen *:40100\n", "    endpoint eth0 udp listen *:40100\n",
		"    endpoint arp udp listen *:40100\n", "    endpoint \u00e9t\u00e9 udp listen *:40100 { app \"\u2603\" }\n", "    endpoint x tcp listen 10.0.0.1:80\n",
	} {
		f.Add(at, uint8(0), put)
	}
	f.Fuzz(func(t *testing.T, at uint16, cut uint8, put string) {
		i := min(int(at), len(base))
		src := base[:i] + put + base[min(len(base), i+int(cut)):]
		var ld Loader
		ld.Load("fuzz.lpg", []byte(base))
		want, wantDiags := LoadStack("fuzz.lpg", []byte(src))
		got, gotDiags := ld.Load("fuzz.lpg", []byte(src))
		if d := cmp.Diff(want, got, files); d != "" {
			t.Fatalf("the Loader's stack differs from LoadStack's (-want +got):\n%s", d)
		}
		if wantDiags.Error() != gotDiags.Error() {
			t.Fatalf("diagnostics: %s, want %s", gotDiags, wantDiags)
		}
	})
}

// loadsAgree loads srcs in turn with one Loader and compares each load
// with LoadStack's.
func loadsAgree(t *testing.T, name string, srcs ...string) {
	t.Helper()
	var ld Loader
	for i, src := range srcs {
		want, wantDiags := LoadStack(name, []byte(src))
		got, gotDiags := ld.Load(name, []byte(src))
		if d := cmp.Diff(want, got, files); d != "" {
			t.Errorf("load %d: stack differs (-want +got):\n%s", i, d)
		}
		if wantDiags.Error() != gotDiags.Error() {
			t.Errorf("load %d: diagnostics %s, want %s", i, gotDiags, wantDiags)
		}
	}
}

// TestLoaderHostile loads hostile edits, each after the file it edits
// (and some after a file with errors), and compares each with LoadStack:
// line endings and blanks the partial path does not expect, names that
// collide with a range's members, an interface, a service or a keyword,
// ports inside another endpoint's range, braces, comments and strings
// that change how the rest of the file reads.
func TestLoaderHostile(t *testing.T) {
	base := "stack edges {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n    cores 0..1\n" +
		"    endpoint a udp listen *:1000 { app \"echo\" }\n    endpoint b udp listen *:1001\n" +
		"    endpoint c udp listen 10.0.0.1:1002..1005 { app \"c\" }\n    service icmp-echo\n    service arp\n}\n"
	rep := func(s, o, n string) string {
		if !strings.Contains(s, o) {
			t.Fatalf("%q not in", o)
		}
		return strings.Replace(s, o, n, 1)
	}
	crlf := strings.ReplaceAll(base, "\n", "\r\n")
	tabs := strings.ReplaceAll(base, "    ", "\t")
	cases := map[string][]string{
		"crlf add":        {crlf, rep(crlf, "    service icmp", "    endpoint d udp listen *:1010\r\n    service icmp")},
		"crlf edit":       {crlf, rep(crlf, "*:1001", "*:1011")},
		"tabs":            {tabs, rep(tabs, "\tservice icmp", "\tendpoint d udp listen *:1010\n\tservice icmp"), rep(tabs, "*:1001", "*:1")},
		"formfeed":        {base, rep(base, "    endpoint b udp listen *:1001\n", "\f\vendpoint b udp listen *:1001\f\n")},
		"non-ascii name":  {base, rep(base, "endpoint b udp", "endpoint bé udp"), rep(base, "endpoint b udp", "endpoint b_ udp")},
		"non-ascii app":   {base, rep(base, `app "c"`, `app "ç☃"`)},
		"iface name":      {base, rep(base, "endpoint b udp", "endpoint eth0 udp")},
		"service name":    {base, rep(base, "endpoint b udp", "endpoint arp udp"), rep(base, "endpoint b udp", "endpoint icmp-echo udp")},
		"range name":      {base, rep(base, "endpoint b udp", "endpoint c-1003 udp")},
		"range ident":     {base, rep(base, "endpoint b udp", "endpoint c_1003 udp")},
		"range overlap":   {base, rep(base, "*:1001", "10.0.0.1:1003"), rep(base, "*:1001", "*:1003")},
		"range grows":     {base, rep(base, "1002..1005", "1000..1005"), rep(base, "1002..1005", "1001..1005")},
		"kept dup port":   {base, rep(base, "    service icmp", "    endpoint d udp listen *:1000\n    service icmp")},
		"swap ports":      {base, rep(base, "*:1000 {", "*:1001 {")},
		"brace":           {base, rep(base, "    endpoint b", "    }\n    endpoint b"), rep(base, "    service icmp", "}\n    service icmp")},
		"unterminated":    {base, rep(base, "    endpoint b", "    /* endpoint b"), base, rep(base, "*:1001", "*:1001 \"")},
		"string eats":     {base, rep(base, "*:1001\n", "*:1001 { app \"x\n")},
		"after error":     {base, rep(base, "*:1001", "*:"), rep(base, "*:1001", "*:1009"), rep(base, "*:1001", "*:")},
		"keyword ident":   {base, rep(base, "endpoint b udp", "endpoint endpoint udp"), rep(base, "endpoint b udp", "endpoint service udp")},
		"flow vs listen":  {base, rep(base, "*:1001", "10.0.0.1:1000 -> 10.0.0.9:5"), rep(base, "listen *:1001", "flow 10.0.0.1:1000 -> 10.0.0.9:5")},
		"core":            {base, rep(base, "*:1001", "*:1001 { core 1 }"), rep(base, "*:1001", "*:1001 { core 5 }")},
		"number glue":     {base, rep(base, "*:1001\n", "*:1001\n9")},
		"bad utf8":        {base, rep(base, "endpoint b udp", "endpoint b\xff udp")},
		"dup in new":      {base, rep(base, "    service icmp", "    endpoint d udp listen *:1010\n    endpoint d udp listen *:1011\n    service icmp")},
		"remove and add":  {base, rep(rep(base, "    endpoint a udp listen *:1000 { app \"echo\" }\n", ""), "    service icmp", "    endpoint a udp listen *:1000\n    service icmp")},
		"shadow wildcard": {base, rep(base, "    service icmp", "    endpoint z udp listen 10.0.0.1:1000\n    service icmp")},
	}
	for name, srcs := range cases {
		t.Run(name, func(t *testing.T) { loadsAgree(t, "r.lpg", srcs...) })
	}
}

// TestLoaderHuge edits a file a few kilobytes below dsl.MaxSource, then
// makes it one above, and loads the first again.
func TestLoaderHuge(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB files")
	}
	var b strings.Builder
	b.WriteString("stack big {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n    endpoint a udp listen *:1000\n")
	pad := strings.Repeat("x", 1000)
	for b.Len() < dsl.MaxSource-3000 {
		b.WriteString("    // " + pad + "\n")
	}
	b.WriteString("    endpoint b udp listen *:1001\n}\n")
	base := b.String()
	over := strings.Replace(base, "    endpoint b", "    // "+pad+pad+pad+"\n    endpoint b", 1)
	loadsAgree(t, "h.lpg", base, strings.Replace(base, "*:1001", "*:1002", 1), over, base)
}

package lpg

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

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

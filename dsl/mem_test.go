package dsl_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/stackgen"
)

// maxParseBytes is what reading a file may allocate per byte of it, over
// and above the syntax tree the file holds: the 64 MiB a file may have
// then cost at most 1.3 GB. A file of closing braces once cost 816 bytes a
// byte (participle's tokens of the whole file, then a copy of them for
// syntax recovery).
const maxParseBytes = 20

// parseCost returns the bytes Parse allocates per byte of src, the
// rendering of its diagnostics (and so the file's line table) included.
func parseCost(t *testing.T, src []byte) (float64, diag.List) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, diags := dsl.Parse("mem", src)
	for _, d := range diags {
		_ = d.String()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(len(src)), diags
}

// repeat fills n bytes with unit, whole units only.
func repeat(unit string, n int) string { return strings.Repeat(unit, n/len(unit)) }

// lines fills n bytes with lines made by line(i).
func lines(head string, n int, line func(i int) string, tail string) []byte {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(line(i))
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// TestParseMemory reads hostile files of 1 MiB, each the worst of its
// kind, and checks what they cost. Broken files whose syntax trees are
// small cost at most maxParseBytes a byte; a broken file with a large tree
// costs at most maxParseBytes a byte more than the file without its error;
// and realistic files cost about their tree.
func TestParseMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 40 MiB")
	}
	const n = 1 << 20
	long := strings.Repeat("N", n)
	cases := []struct {
		name string
		src  string
	}{
		{"closing braces", repeat("}", n)},
		{"a graph, then closing braces", "graph g {" + repeat("}", n)},
		{"a stack, then closing braces", "stack s {" + repeat("}", n)},
		{"opening braces", repeat("{", n)},
		{"brackets 256 deep, again and again", repeat(strings.Repeat("{", 256)+strings.Repeat("}", 256), n)},
		{"clusters 200 deep, again and again", "graph g {" + repeat(strings.Repeat("cluster C {", 200)+"node A { port ]] }"+strings.Repeat("}", 200), n)},
		{"types nested without end", "graph g { node A { type " + repeat("<", n)},
		{"a long graph name", "graph " + long + " { }"},
		{"a long stack name", "stack " + long + " { }"},
		{"a long node name", "graph g { node " + long + " { port out[] } }"},
		{"a long name, never closed", "graph g { node " + long},
		{"a long name where none goes", "stack s { " + long + " }"},
		{"junk", repeat("@ ", n)},
		{"junk after a graph", "graph g {" + repeat(",", n)},
		{"letters outside ASCII", "graph g { node A { port o[" + repeat("é ", n) + "] } }"},
		{"names outside ASCII", "graph g {\n" + repeat("node é { }\n", n) + "}"},
		{"numbers", repeat("1 ", n)},
		{"newlines", repeat("\n", n)},
		{"comments", repeat("/**/", n)},
		{"line comments", repeat("//\n", n)},
		{"a comment never closed", repeat("\n", n) + "/*"},
		{"a string never closed", "graph g { node A { attr " + repeat("\"x\" ", n) + "\"x } }"},
		{"many broken nodes", string(lines("graph g {\n", n, func(i int) string { return fmt.Sprintf("  node N%d { port ]] }\n", i) }, "}\n"))},
		{"many broken endpoints", string(lines("stack s {\n", n, func(i int) string { return fmt.Sprintf("  endpoint e%d udp listen *:x\n", i) }, "}\n"))},
	}
	for _, c := range cases {
		cost, diags := parseCost(t, []byte(c.src))
		if !diags.HasErrors() && !strings.HasPrefix(c.name, "a long") {
			t.Errorf("%s: no error", c.name)
		}
		t.Logf("%-40s %6.1f bytes a byte, %d diagnostics", c.name, cost, len(diags))
		if cost > maxParseBytes {
			t.Errorf("%s: %.1f bytes allocated per byte of input, want at most %d", c.name, cost, maxParseBytes)
		}
		for _, d := range diags {
			if len(d.String()) > 1024 {
				t.Errorf("%s: a diagnostic of %d bytes", c.name, len(d.String()))
			}
		}
	}

	// Broken files with large trees, each against the file without its
	// error: the tree is the file's, the rest is the error's.
	node := func(i int) string { return fmt.Sprintf("  node N%d { port out[N%d] }\n", i, i+1) }
	spread := func(i int) string {
		if i%1000 == 999 {
			return fmt.Sprintf("  node N%d { port ]] }\n", i)
		}
		return node(i)
	}
	valid := string(lines("graph g {\n", n, node, "}\n"))
	pairs := []struct{ name, valid, broken string }{
		{"a node with a huge port, then an error", "graph g { node A { port o[" + repeat("a ", n) + "] } }", "graph g { node A { port o[" + repeat("a ", n) + "] ] } }"},
		{"a huge SMT-LIB block, then an error", "graph g { helpers {" + repeat("a ", n) + "} }", "graph g { helpers {" + repeat("a ", n) + "} ] }"},
		{"a graph, then an error", valid, valid + "}"},
		{"a graph with an error every 1000 nodes", valid, string(lines("graph g {\n", n, spread, "}\n"))},
		{"a stack, then an error", string(stackgen.Mixed(16000, false)), string(stackgen.Mixed(16000, false)) + "}"},
	}
	for _, c := range pairs {
		base, diags := parseCost(t, []byte(c.valid))
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.name, diags)
		}
		cost, diags := parseCost(t, []byte(c.broken))
		if !diags.HasErrors() {
			t.Errorf("%s: no error", c.name)
		}
		t.Logf("%-40s %6.1f bytes a byte, %.1f without the error, %d diagnostics", c.name, cost, base, len(diags))
		if cost > base+maxParseBytes {
			t.Errorf("%s: %.1f bytes allocated per byte of input, %.1f without the error; want at most %d more", c.name, cost, base, maxParseBytes)
		}
	}

	// Realistic files: the tree costs some 25 bytes a byte (its nodes
	// carry two positions of 40 bytes each); participle's tree of a graph
	// cost 594.
	for _, c := range []struct {
		name string
		src  []byte
	}{
		{"a stack of 16,000 endpoints", stackgen.Mixed(16000, false)},
		{"a graph of 37,000 nodes", []byte(valid)},
	} {
		cost, diags := parseCost(t, c.src)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.name, diags)
		}
		t.Logf("%-40s %6.1f bytes a byte", c.name, cost)
		if cost > 2*maxParseBytes {
			t.Errorf("%s: %.1f bytes allocated per byte of input, want at most %d", c.name, cost, 2*maxParseBytes)
		}
	}
}

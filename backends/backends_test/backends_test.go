// Package backends_test checks every output of dragonc embed -o on every
// built-in NIC and example: golden files, the generated Go module built and
// tested with the go command, and a stack with hostile strings.
package backends_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/backends"
	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/backends/nicconf"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/stackgen"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sovia"
)

var nicNames = []string{"82576", "82599", "myri10g", "tigon", "dragonet-e10k", "dragonet-sf"}

func plan(t testing.TB, nic, name string, src []byte) (*embed.Result, *lpg.Stack) {
	t.Helper()
	return embedtest.Plan(t, nic, name, src, costmodel.Balance{})
}

// outputs renders what embed -o writes, and checks that the generated Go
// is gofmt-clean (plan.json is tested in embed).
func outputs(t testing.TB, r *embed.Result, st *lpg.Stack, source string) map[string][]byte {
	files, err := backends.Files(r, st, source)
	if err != nil {
		t.Fatal(err)
	}
	delete(files, "plan.json")
	for k, v := range files {
		if strings.HasPrefix(k, "fallback/") && strings.HasSuffix(k, ".go") {
			gofmtClean(t, k, v)
			readable(t, k, v)
		}
	}
	return files
}

// maxNesting is how deep the generated code may nest blocks (if, switch,
// case, for) inside a function.
const maxNesting = 6

// hexPort is a port compared with, or keyed by, a hex constant; the
// generated code writes ports in decimal.
var hexPort = regexp.MustCompile(`(?i)(port\(\)|port\]) (==|!=|<=|>=|<|>) 0x|\{0x[0-9a-f]+, 0x[0-9a-f]+, Verdict`)

// readable fails the test when generated Go nests deeper than maxNesting,
// writes ports in hex, or names an endpoint in a table by its number.
func readable(t testing.TB, name string, src []byte) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
	if err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			if n := nesting(fd.Body); n > maxNesting {
				t.Errorf("%s: %s nests %d blocks deep, more than %d", name, fd.Name.Name, n, maxNesting)
			}
		}
	}
	if m := hexPort.Find(src); m != nil {
		t.Errorf("%s writes a port or a table key in hex: %s", name, m)
	}
	if m := regexp.MustCompile(`Verdict\{Deliver, \d+\}`).Find(src); m != nil {
		t.Errorf("%s names an endpoint by its number: %s", name, m)
	}
}

// nesting is the depth of the deepest block below n: an if, for, switch,
// select or function literal counts one, a case clause one more.
func nesting(n ast.Node) int {
	deepest := 0
	ast.Inspect(n, func(c ast.Node) bool {
		if c == n || c == nil {
			return true
		}
		switch c.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt, *ast.FuncLit, *ast.CaseClause, *ast.CommClause:
			deepest = max(deepest, 1+nesting(c))
			return false
		}
		return true
	})
	return deepest
}

// gofmtClean fails the test when gofmt would change a generated file.
func gofmtClean(t testing.TB, name string, src []byte) {
	t.Helper()
	b, err := format.Source(src)
	if err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	if !bytes.Equal(b, src) {
		t.Errorf("%s is not gofmt-clean:\n%s", name, cmp.Diff(strings.Split(string(b), "\n"), strings.Split(string(src), "\n")))
	}
}

// TestTablesGofmtClean: the lookup tables of large stacks, written without
// the formatter, are in gofmt's layout.
func TestTablesGofmtClean(t *testing.T) {
	for _, flowsFirst := range []bool{false, true} {
		r, st := plan(t, "82599", "mixed.lpg", stackgen.Mixed(2000, flowsFirst))
		files := outputs(t, r, st, "mixed.lpg")
		if len(files["fallback/tables.go"]) == 0 {
			t.Fatalf("flows first %v: no tables.go for 2,000 endpoints", flowsFirst)
		}
	}
}

func write(t testing.TB, dir string, files map[string][]byte) {
	if err := gofallback.WriteTree(dir, files); err != nil {
		t.Fatal(err)
	}
}

// TestOutputs keeps golden copies of the outputs of the smaller examples
// and builds, vets and tests every generated fallback module.
func TestOutputs(t *testing.T) {
	t.Parallel() // runs beside the other long test of the package
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	examples, _ := filepath.Glob("../../examples/*.lpg")
	type job struct{ dir, name string }
	var jobs []job
	root := t.TempDir()
	for _, nic := range nicNames {
		for _, ex := range examples {
			name := strings.TrimSuffix(filepath.Base(ex), ".lpg")
			src, _ := os.ReadFile(ex)
			r, st := plan(t, nic, "examples/"+name+".lpg", src)
			files := outputs(t, r, st, "examples/"+name+".lpg")
			if len(st.Endpoints) <= 200 {
				for _, k := range slices.Sorted(maps.Keys(files)) {
					if k == "fallback/fallback_test.go" || k == "embedding.dot" {
						continue // long; the go test below checks them
					}
					golden.Check(t, filepath.Join("../../testdata/backends", nic, name, k+".golden"), files[k])
				}
			}
			dir := filepath.Join(root, nic, name)
			write(t, dir, files)
			jobs = append(jobs, job{dir, nic + "/" + name})
		}
	}
	// One workspace holds every generated module, so one go vet and one
	// go test build them all in one build graph (go test runs the test
	// binaries in parallel itself). Each module is named after its NIC
	// and stack here, since a workspace needs distinct module paths; the
	// generated code never imports its own module path.
	work := "go 1.21\n\nuse (\n"
	for _, j := range jobs {
		mod := filepath.Join(j.dir, "fallback", "go.mod")
		b, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		first, rest, _ := strings.Cut(string(b), "\n")
		if !strings.HasPrefix(first, "module ") {
			t.Fatalf("%s: go.mod starts %q", j.name, first)
		}
		if err := os.WriteFile(mod, []byte("module dragonc.generated/"+j.name+"\n"+rest), 0o644); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, filepath.Join(j.dir, "fallback"))
		work += "\t./" + filepath.ToSlash(rel) + "\n"
	}
	vetAndTest(t, goCmd, root, work+")\n", len(jobs), "generated")
	t.Logf("built, vetted and tested %d generated fallback modules", len(jobs))
}

// vetAndTest writes the workspace work into root and runs go vet and go
// test over its n modules (dragonc.generated/...), in one build graph.
func vetAndTest(t *testing.T, goCmd, root, work string, n int, what string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte(work), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "dragonc.generated/..."}, {"test", "-count=1", "dragonc.generated/..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK="+filepath.Join(root, "go.work"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go %s over the %d %s modules: %v\n%s", args[0], n, what, err, out)
			continue
		}
		// A pattern that matches nothing only warns: count what ran.
		if ran := strings.Count(string(out), "ok  \tdragonc.generated/"); args[0] == "test" && ran != n {
			t.Errorf("go test ran %d of the %d %s modules' tests:\n%s", ran, n, what, out)
		}
	}
}

// hostile is a stack whose strings try shell and Go injection.
var hostile = "stack hostile {\n" +
	"    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n" +
	"    cores 0..3\n" +
	"    endpoint func udp listen *:53 { app \"$(touch PWNED1)\" core 1 }\n" +
	"    endpoint type udp listen *:54 { app \"`touch PWNED2`; rm -rf x\" core 2 }\n" +
	"    endpoint go tcp listen *:80 { app \"it's \\\"quoted\\\"\\n$HOME\" core 3 }\n" +
	"    endpoint package udp listen *:55 { app \"ünïcødé \u2028 x\" }\n" +
	"    endpoint a_b udp listen *:56\n" +
	"    endpoint range udp listen *:57..58\n" +
	"    endpoint names udp listen *:59 { app \"\x1b[31mred\x00\" core 1 }\n" +
	"    endpoint Names udp listen *:60\n" +
	goNames +
	"}\n"

// goNames are endpoints named after Go's predeclared identifiers and the
// generated package's own names.
var goNames = func() string {
	var b strings.Builder
	for i, n := range []string{"int", "string", "nil", "true", "len", "append", "error", "iota", "any", "Kind", "Drop", "Deliver", "Reply", "Sink",
		"Verdict", "Endpoint", "Flags", "Meta", "Queues", "Process", "NoEndpoint", "queue0", "decode", "frame",
		"Replies", "Sinks", "DropSites", "DropSite", "Index", "String", "entry", "dense", "hashed", "newDense", "fields", "queue1", "hasIp", "EndpointNames2"} {
		fmt.Fprintf(&b, "    endpoint %s udp listen *:%d\n", n, 61+i)
	}
	return b.String()
}()

func TestHostileNames(t *testing.T) {
	for _, nic := range []string{"82599", "82576"} {
		r, st := plan(t, nic, "hostile\n`x`.lpg", []byte(hostile))
		dir := t.TempDir()
		write(t, dir, outputs(t, r, st, "hostile\n`$(touch PWNED3)`.lpg"))
		script := filepath.Join(dir, "linux.sh")
		if out, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
			t.Fatalf("sh -n: %v\n%s", err, out)
		}
		if sc, err := exec.LookPath("shellcheck"); err == nil {
			if out, err := exec.Command(sc, script).CombinedOutput(); err != nil {
				t.Errorf("shellcheck: %v\n%s", err, out)
			}
		} else {
			t.Log("shellcheck is not installed; only sh -n checked the script")
		}
		cmd := exec.Command("sh", script, "--dry-run", "eth0")
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		cmd.Run()
		for _, f := range []string{"PWNED1", "PWNED2", "PWNED3"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Fatalf("the dry run executed a command from a user string (%s exists)", f)
			}
		}
		if b, _ := os.ReadFile(script); bytes.ContainsAny(b, "\x1b\x00") {
			t.Error("linux.sh holds raw control bytes from an app string")
		}
		if !strings.Contains(out.String(), `\x1b[31mred\x00`) {
			t.Errorf("dry run does not show the app's control bytes escaped:\n%s", out.String())
		}
		if bytes.ContainsAny(out.Bytes(), "\x1b\x00") {
			t.Error("the dry run prints raw control bytes")
		}
		for _, want := range []string{"$(touch PWNED1)", "`touch PWNED2`; rm -rf x"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("dry run does not show %q literally:\n%s", want, out.String())
			}
		}
		goCmd, err := exec.LookPath("go")
		if err != nil {
			continue
		}
		build := exec.Command(goCmd, "test", "-count=1", "./...")
		build.Dir = filepath.Join(dir, "fallback")
		build.Env = append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			t.Errorf("the fallback of a hostile stack does not build and pass: %v\n%s", err, out)
		}
	}
}

// TestSoviaConf: on both VIA models the cluster example's sovia.conf is a
// golden file, package sovia reads it back, and what it reads is the
// plan's decision: the VI endpoints with their settings, the rest on TCP.
func TestSoviaConf(t *testing.T) {
	src, err := os.ReadFile("../../examples/cluster_db.lpg")
	if err != nil {
		t.Fatal(err)
	}
	for _, nic := range []string{"clan1000", "mvia"} {
		r, _ := plan(t, nic, "examples/cluster_db.lpg", src)
		conf := nicconf.Files(r, "examples/cluster_db.lpg")["sovia.conf"]
		golden.Check(t, filepath.Join("../../testdata/backends", nic, "cluster_db", "sovia.conf.golden"), conf)
		got, err := sovia.ReadConf(bytes.NewReader(conf))
		if err != nil {
			t.Fatalf("%s: %v\n%s", nic, err, conf)
		}
		want := r.Plan.VIA.Streams
		if len(got) != len(want) {
			t.Fatalf("%s: %d streams, the plan has %d", nic, len(got), len(want))
		}
		vis := 0
		for i, s := range got {
			w := want[i]
			if s.Name != w.Endpoint || s.Transport != w.Transport || s.VI != w.VI || s.Local.String() != w.Local {
				t.Errorf("%s: stream %d %+v; the plan says %+v", nic, i, s, w)
			}
			if s.Transport == "vi" {
				vis++
				p := s.Params
				if p.Window != w.Window || p.AckThreshold != w.AckThreshold || p.Descriptors() != w.Descriptors || p.ChunkSize != w.Chunk || p.CopyMax != w.CopyMax || p.NoDelay != w.NoDelay {
					t.Errorf("%s %s: %+v; the plan says %+v", nic, s.Name, p, w)
				}
			}
		}
		if vis != 3 || vis != r.Plan.VIA.VIsUsed {
			t.Errorf("%s: %d VI streams, plan %d; want 3", nic, vis, r.Plan.VIA.VIsUsed)
		}
	}
	// A NIC without VIs writes no sovia.conf.
	r, _ := plan(t, "82599", "examples/cluster_db.lpg", src)
	if _, ok := nicconf.Files(r, "x")["sovia.conf"]; ok || r.Plan.VIA != nil {
		t.Error("the 82599 has no VIs, but the plan has a VIA decision")
	}
}

// TestSwappable generates every example, and the hostile stack, for
// dragonc run (gofallback's Options.Swappable) on linux-xdp: the files
// are gofmt-clean and readable, and each module's own test (the
// reference interpreter's verdict for every test frame) passes, so the
// code that looks endpoints up in swapped tables decides as the LPG does.
func TestSwappable(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	examples, _ := filepath.Glob("../../examples/*.lpg")
	root := t.TempDir()
	work := "go 1.21\n\nuse (\n"
	n := 0
	add := func(name string, src []byte) {
		r, st := plan(t, "linux-xdp", name, src)
		sw, err := gofallback.GenerateSwappable(r, st, gofallback.Options{Source: name, Module: fmt.Sprintf("dragonc.generated/swap%d", n)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k, v := range sw.Files {
			if strings.HasSuffix(k, ".go") {
				gofmtClean(t, name+": "+k, v)
				readable(t, name+": "+k, v)
			}
		}
		dir := filepath.Join(root, fmt.Sprint(n))
		write(t, dir, sw.Files)
		work += "\t./" + fmt.Sprint(n) + "\n"
		n++
	}
	for _, ex := range examples {
		src, _ := os.ReadFile(ex)
		add("examples/"+filepath.Base(ex), src)
	}
	add("hostile.lpg", []byte(hostile))
	vetAndTest(t, goCmd, root, work+")\n", n, "swappable")
}

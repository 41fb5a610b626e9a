package dragonc_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden"
)

const module = "github.com/dragonc/dragonc"

// allowed lists, for every package of the module, the module packages it
// may import (the README's architecture section: cmd → backends, embed → prg, lpg, costmodel
// → dsl, internal/*; never the other way). Outside libraries enter through
// one package each, checked by libraryHome.
var allowed = map[string][]string{
	"internal/diag":     {},
	"internal/golden":   {},
	"internal/stackgen": {},
	// Network namespaces entered by a thread: the live benchmark's and
	// the tests'.
	"internal/netns":     {},
	"internal/netnstest": {"internal/netns"},
	"internal/pred":      {"internal/diag"},
	"internal/graph":     {"internal/pred"},
	"internal/packet":    {"internal/fallback", "internal/pred"},
	// The runtime of generated modules (decoder, tables, verdict), shipped
	// into them by go:embed: the standard library only.
	"internal/fallback": {},
	"internal/solver":   {"internal/pred"},
	"costmodel":         {},
	// The plan.json schema, its writer and reader.
	"plan":         {"costmodel"},
	"nics":         {"internal/diag", "prg"},
	"discover":     {"prg"},
	"prg":          {"dsl", "internal/diag", "internal/graph", "internal/packet", "internal/pred"},
	"dsl":          {"internal/diag", "internal/graph", "internal/pred"},
	"backends":     {"backends/dot", "backends/gofallback", "backends/linux", "backends/nicconf", "embed", "lpg"},
	"backends/dot": {"embed", "embedding", "internal/graph"},
	"lpg":          {"dsl", "internal/diag", "internal/graph", "internal/packet", "internal/pred"},
	// The per-queue embedding of an LPG into a configured PRG.
	"embedding":                {"internal/graph", "internal/packet", "internal/pred", "internal/solver", "lpg", "prg"},
	"engines":                  {"dsl", "internal/graph", "prg"},
	"embed":                    {"costmodel", "embedding", "engines", "internal/diag", "internal/graph", "internal/packet", "internal/pred", "internal/solver", "lpg", "nics", "plan", "prg", "sim", "streams"},
	"streams":                  {"dsl", "internal/graph", "internal/pred", "lpg", "prg", "sovia"},
	"sim":                      {"embedding", "internal/graph", "internal/packet", "internal/pred", "lpg", "prg"},
	"backends/linux":           {"embed", "internal/graph", "internal/pred", "plan", "prg"},
	"backends/linux/linuxtest": {"backends/linux", "embed"},
	"backends/nicconf":         {"embed", "lpg", "plan", "prg", "sovia"},
	"backends/gofallback":      {"embed", "embedding", "internal/fallback", "internal/graph", "internal/pred", "lpg", "sim"},
	"bench":                    {"backends/gofallback", "bench/baseline", "costmodel", "embed", "internal/packet", "internal/pred", "lpg", "prg", "sim"},
	"bench/baseline":           {"internal/packet", "lpg"},
	// The live benchmark serves with dragonc run beside other servers.
	"bench/live": {"bench/sovialat", "costmodel", "embed", "internal/netns", "lpg", "nics", "plan", "run", "run/dataplane", "sovia", "streams"},
	// Providers measured side by side (dragonc sovia bench, calibrate).
	"bench/sovialat":               {},
	"verify/internal/fuzzfallback": {},
	"verify":                       {"backends/gofallback", "embed", "internal/graph", "internal/packet", "lpg", "prg", "sim"},
	"load":                         {"dsl", "internal/diag", "internal/graph", "lpg", "prg"},
	// Embeddings for the tests of the packages that consume them, as
	// net/http/httptest serves net/http's.
	"embed/embedtest": {"costmodel", "embed", "lpg", "nics", "prg"},
	"cmd/dragonc":     {"backends", "backends/dot", "bench", "bench/live", "bench/sovialat", "costmodel", "discover", "dsl", "embed", "internal/diag", "internal/graph", "internal/outdir", "load", "lpg", "nics", "plan", "prg", "run", "sovia", "streams", "verify"},
	"internal/outdir": {},
	"run":             {"backends/gofallback", "backends/linux", "backends/nicconf", "costmodel", "discover", "embed", "internal/diag", "internal/graph", "internal/outdir", "internal/packet", "internal/pred", "lpg", "nics", "plan", "prg", "run/dataplane", "sovia"},
	// The data plane is shipped into generated modules: the standard
	// library only.
	"run/dataplane": {},
	// The SOVIA layer stands alone: a sockets layer over VIs.
	"sovia": {},
}

// libraryHome says which package may import each outside library.
var libraryHome = map[string][]string{
	// The predicate language has its own small grammar, parsed where the
	// predicate types live.
	"github.com/alecthomas/participle/v2": {"dsl", "internal/pred"},
	"github.com/emicklei/dot":             {"backends/dot"},
	"gonum.org/v1/gonum":                  {"internal/graph"},
	// bench times a baseline written with gopacket, as docs/cli.md asks.
	"github.com/gopacket/gopacket": {"internal/packet", "bench/baseline"},
	// The command line: cobra and its flag package, the progress bar and
	// the terminal check behind it.
	"github.com/spf13/cobra":            {"cmd/dragonc"},
	"github.com/spf13/pflag":            {"cmd/dragonc"},
	"github.com/schollz/progressbar/v3": {"cmd/dragonc"},
	"golang.org/x/term":                 {"cmd/dragonc"},
	// dragonc run writes its eBPF stage with cilium/ebpf's asm package.
	// bench/live's XDP_TX reflector too, and internal/netnstest's
	// frame-dropping XDP program (loss without netem).
	"github.com/cilium/ebpf": {"run", "bench/live", "internal/netnstest"},
}

// skipDir reports whether a walk of the module skips a directory: test
// data, hidden directories, and nested modules (a directory with its own
// go.mod, such as the fallback/ that embed -o writes), which go test ./...
// skips too.
func skipDir(path string, d fs.DirEntry) bool {
	if path == "." {
		return false
	}
	if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// TestEveryTestImportsGolden makes `go test ./... -update` work: a test
// binary that does not define -update would fail on it.
func TestEveryTestImportsGolden(t *testing.T) {
	fset := token.NewFileSet()
	has := map[string]bool{}
	tested := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(path, d) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		tested[dir] = true
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote(module+"/internal/golden") {
				has[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range tested {
		if !has[dir] {
			t.Errorf("the tests of %s do not import internal/golden, so go test ./... -update fails there", dir)
		}
	}
}

// TestImports is the project's go/build/deps_test.go: it fails when a
// package imports one it may not.
func TestImports(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, d) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rules, known := allowed[pkg]
		if !known {
			t.Errorf("package %s is not in the import table of deps_test.go; add it with the packages it may import", pkg)
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				if !slices.Contains(rules, dep) {
					t.Errorf("%s imports %s, which it may not", path, dep)
				}
				continue
			}
			for lib, homes := range libraryHome {
				if strings.HasPrefix(p, lib) && !slices.Contains(homes, pkg) {
					t.Errorf("%s imports %s; that library enters only through %v", path, p, homes)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInternalBelowEverything: the packages under internal/ sit below
// everything, as the README says: they may import one another but no
// top-level package (a helper that needs one is a package of its own, as
// load and embed/embedtest are).
func TestInternalBelowEverything(t *testing.T) {
	for pkg, deps := range allowed {
		if !strings.HasPrefix(pkg, "internal/") {
			continue
		}
		for _, dep := range deps {
			if !strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s may import %s, a package above internal/", pkg, dep)
			}
		}
	}
}

// TestArchitectureTable: the README's architecture table lists the
// packages so that imports only go down it, as it says: no package may
// import one whose row stands above its own.
func TestArchitectureTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "| folder | responsibility |")
	if i < 0 {
		t.Fatal("README.md has no architecture table")
	}
	row := map[string]int{}
	for k, line := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.Split(line, "|")[1]
		for _, part := range strings.Split(cell, "`") {
			if _, ok := allowed[part]; ok {
				row[part] = k
			}
		}
	}
	for pkg, deps := range allowed {
		r, listed := row[pkg]
		if !listed {
			continue
		}
		for _, dep := range deps {
			if d, ok := row[dep]; ok && d < r {
				t.Errorf("README.md: %s may import %s, whose row is above its own", pkg, dep)
			}
		}
	}
	if len(row) < 20 {
		t.Errorf("only %d packages found in the architecture table", len(row))
	}
}

package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/packet"
)

// dragonc runs the command in-process from the repository root and returns
// its exit code, stdout and stderr.
func dragonc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckValid(t *testing.T) {
	code, out, errs := dragonc(t, "check", "-v", "testdata/unicorn/everything.unicorn", "testdata/graphs/filters.unicorn")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	want := "testdata/unicorn/everything.unicorn: graph everything: 23 nodes, 29 edges, 3 spawn edges\n" +
		"testdata/graphs/filters.unicorn: graph e10kPRG: 6 nodes, 6 edges, 1 spawn edges\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errs, "warning: node \"RxDrop\" is declared twice") {
		t.Errorf("the duplicate warning is missing from stderr:\n%s", errs)
	}
}

var diagLine = regexp.MustCompile(`^testdata/bad/[a-z_0-9]+\.unicorn:\d+:\d+: (error|warning): .+ \[[EW]\d+\]$`)

// TestCheckMalformed runs check on every malformed file: exit 1, every
// stderr line in FILE:LINE:COL form, never a panic or a Go stack trace.
func TestCheckMalformed(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/bad/*.unicorn")
	if len(files) < 30 {
		t.Fatalf("only %d malformed files", len(files))
	}
	for _, f := range files {
		rel := strings.TrimPrefix(f, "../../")
		code, _, errs := dragonc(t, "check", rel)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", rel, code)
		}
		for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
			if !diagLine.MatchString(line) {
				t.Errorf("%s: stderr line not in FILE:LINE:COL form: %q", rel, line)
			}
		}
		if strings.Contains(errs, "goroutine") || strings.Contains(errs, "panic") {
			t.Errorf("%s: stack trace on stderr:\n%s", rel, errs)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "Usage:"},
		{[]string{"chekc"}, 2, `unknown command "chekc" for "dragonc"; Did you mean this? check`},
		{[]string{"check"}, 2, "dragonc check: want one or more files to check\nRun 'dragonc check --help' for usage.\n"},
		{[]string{"check", "-bogus", "x"}, 2, "dragonc check: unknown flag -bogus\n"},
		{[]string{"check", "--bogus", "x"}, 2, "dragonc check: unknown flag: --bogus\n"},
		{[]string{"check", "no/such/file.prg"}, 1, "no/such/file.prg: no such file"},
		{[]string{"fmt"}, 2, "dragonc fmt: want one or more files to format"},
		{[]string{"fmt", "-w", "-"}, 2, "-w cannot rewrite standard input"},
		{[]string{"dot"}, 2, "dragonc dot: want one graph file or NIC, got 0 argument(s)"},
		{[]string{"dot", "--svg", "--png", "82599"}, 2, "[png svg] were all set"},
		{[]string{"dot", "testdata/bad/cycle.unicorn"}, 1, "E330"},
		{[]string{"help", "embd"}, 2, `dragonc help: no help topic "embd"; did you mean "embed"?`},
		{[]string{"embed", "examples/dns_ntp.lpg", "82599"}, 2, "the NIC comes first: dragonc embed 82599 examples/dns_ntp.lpg"},
		{[]string{"embed", "82599", "examples/dns_ntp.lpg", "-o"}, 2, "flag needs an argument: 'o' in -o"},
		{[]string{"embed", "82599", "examples/dns_ntp.lpg", "-o", "--json"}, 2, `-o needs a directory, got "--json"`},
		{[]string{"embed", "--explain", "RxL4UDPDemux", "-o", "x", "82599", "examples/dns_ntp.lpg"}, 2, "[explain output] were all set"},
		{[]string{"embed", "--json", "-o", "x", "82599", "examples/dns_ntp.lpg"}, 2, "[json output] were all set"},
		{[]string{"verify", "--packets", "-1", "82599", "examples/dns_ntp.lpg"}, 2, "--packets -1 is not in 0..10000000"},
		{[]string{"bench", "--frames", "0", "82599", "examples/dns_ntp.lpg"}, 2, "--frames 0 is not in 1..1000000"},
		{[]string{"embed", "--json", "--copy-engine", "82599", "82599", "examples/dns_ntp.lpg"}, 1, "dragonc: 82599 has 0 copy engines; --copy-engine takes a model with one"},
	}
	for _, c := range cases {
		code, _, errs := dragonc(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("dragonc %v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.msg)
		}
		// A usage error is one line naming the problem and one pointing
		// at the help.
		if c.code == 2 && c.args != nil && (strings.Count(errs, "\n") != 2 || !strings.Contains(errs, "--help' for usage.")) {
			t.Errorf("dragonc %v: usage error is not two lines:\n%s", c.args, errs)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"check", "fmt", "dot"} {
		code, out, _ := dragonc(t, "help", cmd)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("help %s: exit %d, no examples:\n%s", cmd, code, out)
		}
	}
}

func TestFmtWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.unicorn")
	if err := os.WriteFile(path, []byte("graph g {node A {port out[]}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := dragonc(t, "fmt", "-l", path)
	if code != 0 || strings.TrimSpace(out) != path {
		t.Fatalf("fmt -l: exit %d, out %q, err %q", code, out, errs)
	}
	if code, _, errs = dragonc(t, "fmt", "-w", path); code != 0 {
		t.Fatalf("fmt -w: exit %d: %s", code, errs)
	}
	got, _ := os.ReadFile(path)
	want := "graph g {\n    node A {\n        port out[]\n    }\n}\n"
	if string(got) != want {
		t.Errorf("fmt -w wrote %q, want %q", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("fmt -w changed the file mode to %v", st.Mode().Perm())
	}
	if code, out, _ = dragonc(t, "fmt", "-l", path); code != 0 || out != "" {
		t.Errorf("a formatted file is listed by fmt -l: %q", out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("fmt -w left temporary files behind: %v", entries)
	}
}

func TestFmtParseError(t *testing.T) {
	code, out, errs := dragonc(t, "fmt", "testdata/bad/missing_bracket.unicorn")
	if code != 1 || out != "" || !strings.Contains(errs, "testdata/bad/missing_bracket.unicorn:2:25: error") {
		t.Errorf("exit %d, out %q, err %q", code, out, errs)
	}
}

func TestDotGolden(t *testing.T) {
	code, out, errs := dragonc(t, "dot", "testdata/unicorn/everything.unicorn")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.Check(t, "../../testdata/unicorn/everything.dot.golden", []byte(out))
	// Same input, byte-identical output.
	if _, again, _ := dragonc(t, "dot", "testdata/unicorn/everything.unicorn"); again != out {
		t.Error("dot output differs between two runs")
	}
}

// TestDotRenders pipes the DOT through Graphviz where it is installed.
func TestDotRenders(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed; skipping the rendering check (apt-get install graphviz)")
	}
	code, out, errs := dragonc(t, "dot", "--svg", "testdata/unicorn/everything.unicorn")
	if code != 0 || !strings.Contains(out, "<svg") {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
}

func TestNics(t *testing.T) {
	code, out, errs := dragonc(t, "nics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.Check(t, "../../testdata/cli/nics.golden", []byte(out))
	code, out, errs = dragonc(t, "nics", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.Check(t, "../../testdata/cli/nics.json.golden", []byte(out))
	for _, want := range []string{`"name": "82599"`, `"node": "RxC5TupleFilter"`, `"capacity": 128`, `"file": "nics/82599.prg"`} {
		if !strings.Contains(out, want) {
			t.Errorf("nics --json lacks %s", want)
		}
	}
}

func TestDotNIC(t *testing.T) {
	code, out, errs := dragonc(t, "dot", "82599")
	if code != 0 || !strings.HasPrefix(out, "digraph") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs = dragonc(t, "dot", "8259")
	if code != 1 || !strings.Contains(errs, `unknown NIC "8259"; did you mean "82599"?`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed; skipping the rendering of 82599 (apt-get install graphviz)")
	}
	cmd := exec.Command("dot", "-Tsvg")
	cmd.Stdin = strings.NewReader(out)
	svg, err := cmd.Output()
	if err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("graphviz could not render the 82599 model: %v", err)
	}
}

func TestLPG(t *testing.T) {
	code, out, errs := dragonc(t, "lpg", "examples/web_and_dns.lpg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"stack web_and_dns: LPG with", "endpoints: 106", "shard-20099", `mc             udp listen 10.0.0.1:11211  app "memcached"  class gold  rate 1.2Mpps  cores 0..3`} {
		if !strings.Contains(out, want) {
			t.Errorf("lpg output lacks %q:\n%s", want, out)
		}
	}
	code, _, errs = dragonc(t, "lpg", "testdata/badstack/openmx_id.lpg")
	if code != 1 || !strings.Contains(errs, "testdata/badstack/openmx_id.lpg:4:23: error: Open-MX endpoint id 256 is above 255") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = dragonc(t, "lpg", "testdata/graphs/filters.unicorn")
	if code != 1 || !strings.Contains(errs, "is a graph, not a stack") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	code, out, _ = dragonc(t, "check", "-v", "examples/dns_ntp.lpg")
	if code != 0 || !strings.HasPrefix(out, "examples/dns_ntp.lpg: stack dns_ntp: 2 endpoints; LPG ") {
		t.Errorf("check -v of a stack: exit %d, %q", code, out)
	}
	code, out, _ = dragonc(t, "dot", "examples/dns_ntp.lpg")
	if code != 0 || !strings.Contains(out, "RxL4UDPDemux") && !strings.Contains(out, "L4UDPDemux") {
		t.Errorf("dot of a stack: exit %d", code)
	}
}

func TestEmbedOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	// Under the cycles cost, dns (its application runs on cores 0 and 1)
	// is spread by RSS over those cores' queues, and ntp gets a filter
	// (exact steering saves the demultiplexing): a five-tuple filter on
	// the silicon, Flow Director through ixgbe (the five-tuple filters are
	// not reachable).
	sdir := filepath.Join(t.TempDir(), "silicon")
	code, out, errs := dragonc(t, "embed", "--cost", "cycles", "--target", "silicon", "82599", "examples/dns_ntp.lpg", "-o", sdir)
	if code != 0 || !strings.HasPrefix(out, "dragonc: wrote "+sdir+": 3 queues, 1 filter entries, cost cycles") {
		t.Fatalf("silicon: exit %d, out %q, err %q", code, out, errs)
	}
	code, out, errs = dragonc(t, "embed", "--cost", "cycles", "82599", "examples/dns_ntp.lpg", "-o", dir)
	if code != 0 || !strings.HasPrefix(out, "dragonc: wrote "+dir+": 3 queues, 1 filter entries, cost cycles") || !strings.Contains(errs, "RxC5TupleFilter could steer 2 endpoint(s) on the silicon, but ixgbe") {
		t.Fatalf("exit %d, out %q, err %q", code, out, errs)
	}
	for _, f := range []string{"plan.json", "linux.sh", "embedding.dot", "fallback/go.mod", "fallback/fallback.go", "fallback/decode.go", "fallback/fallback_test.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	plan, _ := os.ReadFile(filepath.Join(dir, "plan.json"))
	for _, want := range []string{`"generated_by": "dragonc"`, `"nic": "82599"`, `"stack": "dns_ntp"`, `"steering": "RxCFDir"`, `"spread": "rss over queues 0,1 on cores 0,1"`, `"target": "linux"`, `"driver": "ixgbe"`, `"where": "hardware"`} {
		if !bytes.Contains(plan, []byte(want)) {
			t.Errorf("plan.json lacks %s", want)
		}
	}
	// Running again replaces dragonc's files, and leaves no temporary
	// files; a user's file in the directory survives.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if code, _, errs = dragonc(t, "embed", "82599", "examples/dns_ntp.lpg", "-o", dir); code != 0 {
		t.Fatalf("second run: %s", errs)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Error("a user's file in the output directory was touched")
	}
	// A directory with a file of ours that dragonc did not write is refused.
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "plan.json"), []byte("precious"), 0o644)
	code, _, errs = dragonc(t, "embed", "82599", "examples/dns_ntp.lpg", "-o", foreign)
	if code != 1 || !strings.Contains(errs, "already holds plan.json, which dragonc did not write") {
		t.Errorf("exit %d, %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(foreign, "plan.json")); string(b) != "precious" {
		t.Error("the foreign directory was touched")
	}
	if code, _, errs = dragonc(t, "embed", "82599", "examples/dns_ntp.lpg", "-o", "/"); code != 1 || !strings.Contains(errs, "root of the file system") {
		t.Errorf("-o /: exit %d, %q", code, errs)
	}
	// An input error leaves no output.
	bad := filepath.Join(t.TempDir(), "never")
	if code, _, _ = dragonc(t, "embed", "82599", "testdata/badstack/openmx_id.lpg", "-o", bad); code != 1 {
		t.Errorf("bad stack: exit %d", code)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("an output directory was written for a bad stack")
	}
}

func TestEmbedReportAndErrors(t *testing.T) {
	code, out, errs := dragonc(t, "embed", "82599", "examples/web_ssh.lpg")
	if code != 0 || !strings.Contains(out, "Predicted cost (balance):") || !strings.Contains(out, "Linux default (RSS only):") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, out, _ = dragonc(t, "embed", "--json", "--cost", "cycles", "82576", "examples/dns_ntp.lpg")
	if code != 0 || !strings.Contains(out, `"function": "cycles"`) {
		t.Errorf("--json --cost cycles: exit %d", code)
	}
	code, out, _ = dragonc(t, "embed", "--explain", "RxL2EtherValidCRC", "82599", "examples/dns_ntp.lpg")
	if code != 0 || !strings.HasPrefix(out, "RxL2EtherValidCRC: hardware") {
		t.Errorf("--explain: exit %d, %q", code, out)
	}
	// A previous plan of dns_ntp on the 82599, spoilt one way each.
	const good = `{
  "generated_by": "dragonc",
  "schema_version": 1,
  "nic": "82599",
  "stack": "dns_ntp",
  "queues": [{"id": 1, "core": 1, "endpoints": ["dns"], "software": []}],
  "config": [
    {"node": "RxCsumOffload", "kind": "enum", "choice": "on"},
    {"node": "RxC5TupleFilter", "kind": "table", "entries": [{"match": "ip.proto == 17 && udp.dport == 53",
      "action": "RxQueue1", "priority": 1, "endpoint": "dns", "fields": [{"field": "ip.proto", "value": 17}, {"field": "l4.dport", "value": 53}]}]}
  ],
  "endpoints": [{"name": "dns", "queues": [1], "steering": "RxC5TupleFilter", "irq_cores": [1]}]
}
`
	prevDir := t.TempDir()
	previous := func(name, old, new string) []string {
		path := filepath.Join(prevDir, name)
		b := strings.Replace(good, old, new, 1)
		if old != new && b == good {
			t.Fatalf("%s: the plan has no %q", name, old)
		}
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"embed", "--strategy", "incremental", "--previous", path, "82599", "examples/dns_ntp.lpg"}
	}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{previous("good.json", "", ""), 0, ""},
		{previous("minus.json", `"schema_version": 1`, `"schema_version": -1`), 1, "minus.json: plan schema version -1 is not one dragonc writes; this dragonc reads schema version 1"},
		{previous("newer.json", `"schema_version": 1`, `"schema_version": 7`), 1, "newer.json: plan schema version 7 is newer than this dragonc reads (1)"},
		{previous("garbage.json", "]}]\n}\n", "]}]\n}\ngarbage\n"), 1, "garbage.json:14:1: data after the plan's JSON object"},
		{previous("comma.json", `"stack": "dns_ntp",`, `"stack": "dns_ntp"`), 1, "comma.json:6:3: not a dragonc plan: invalid character '\"' after object key:value pair"},
		{previous("type.json", `"core": 1,`, `"core": "1",`), 1, "type.json:6:32: not a dragonc plan: queues.core is a JSON string, want an integer"},
		{previous("node.json", `"node": "RxC5TupleFilter"`, `"node": "RxC5TupleFiltr"`), 1, `node.json: config[1] names configuration node "RxC5TupleFiltr", which NIC model i82599 does not have (did you mean "RxC5TupleFilter"?)`},
		{previous("queue.json", `"id": 1,`, `"id": 200,`), 1, "queue.json: queues[0] names receive queue 200, which NIC model i82599 does not have (it has 128)"},
		{previous("many.json", `"queues": [1], "steering"`, `"queues": [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211], "steering"`), 1, "many.json: and 2 more\n"},
		{previous("gone.json", `"endpoints": [{`, `"endpoints": [{"name": "gone", "queues": [1], "steering": "rss", "irq_cores": [1]}, {`), 0, ""},
		{[]string{"embed", "82599"}, 2, "dragonc embed: want NIC and STACK.lpg, got 1 argument(s)"},
		{[]string{"embed", "8259", "examples/dns_ntp.lpg"}, 1, `did you mean "82599"?`},
		{[]string{"embed", "--cost", "speed", "82599", "examples/dns_ntp.lpg"}, 2, `unknown cost function "speed"; choose balance, priority, cycles`},
		{[]string{"embed", "--strategy", "magic", "82599", "examples/dns_ntp.lpg"}, 2, `unknown strategy "magic"; choose default, dragonet-greedy, incremental`},
		{[]string{"embed", "--strategy", "incremental", "82599", "examples/dns_ntp.lpg"}, 2, "--previous"},
		{[]string{"embed", "ioat", "examples/dns_ntp.lpg"}, 1, "no receive queue"},
		{[]string{"embed", "82599", "examples/missing.lpg"}, 1, "no such file"},
	}
	for _, c := range cases {
		code, _, errs := dragonc(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.args, code, errs, c.code, c.msg)
		}
	}
}

func TestVerifyCommand(t *testing.T) {
	code, out, errs := dragonc(t, "verify", "--packets", "2000", "--fallback=false", "82599", "examples/dns_ntp.lpg")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || lines[len(lines)-1] != "2000 packets, 0 mismatches" {
		t.Fatalf("exit %d, last line %q, err %q", code, lines[len(lines)-1], errs)
	}
	code, _, errs = dragonc(t, "verify", "--pcap", "no/such.pcap", "82599", "examples/dns_ntp.lpg")
	if code != 1 || !strings.Contains(errs, "no/such.pcap: no such file") {
		t.Errorf("missing capture: exit %d, %q", code, errs)
	}
	junk := filepath.Join(t.TempDir(), "junk.pcap")
	os.WriteFile(junk, []byte("not a capture"), 0o644)
	code, _, errs = dragonc(t, "verify", "--pcap", junk, "82599", "examples/dns_ntp.lpg")
	if code != 1 || !strings.Contains(errs, "not a pcap or pcapng file") {
		t.Errorf("junk capture: exit %d, %q", code, errs)
	}
}

func TestEmbedPicture(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed; skipping the embedding picture (apt-get install graphviz)")
	}
	dir := filepath.Join(t.TempDir(), "out")
	if code, _, errs := dragonc(t, "embed", "--svg", "82599", "examples/dns_ntp.lpg", "-o", dir); code != 0 {
		t.Fatal(errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "embedding.svg"))
	if err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("embedding.svg: %v", err)
	}
	code, out, errs := dragonc(t, "embed", "--png", "82576", "examples/web_ssh.lpg")
	if code != 0 || !strings.HasPrefix(out, "\x89PNG") {
		t.Errorf("--png on stdout: exit %d, %s", code, errs)
	}
}

func TestTraceCommand(t *testing.T) {
	// A datagram to 192.0.2.10:53 of examples/dns_ntp.lpg.
	frame := hex.EncodeToString(packet.MustBuild(packet.Spec{DstMAC: net.HardwareAddr{0x00, 0x1b, 0x21, 0, 0, 1},
		Src: net.IP{198, 51, 100, 7}, Dst: net.IP{192, 0, 2, 10}, Proto: packet.ProtoUDP, SrcPort: 4000, DstPort: 53}))
	code, out, errs := dragonc(t, "trace", "--json", "--fallback=false", "--frame", frame, "82599", "examples/dns_ntp.lpg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{`"frame":1`, `"outcome":"deliver"`, `"endpoint":"dns"`, `"reason":""`, `"node":"RxL4UDPDemux","port":"dns"`} {
		if !strings.Contains(out, s) {
			t.Errorf("trace lacks %s:\n%s", s, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("%d lines for one frame", n)
	}
	code, out, _ = dragonc(t, "trace", "--fallback=false", "--pcap", "testdata/captures/none.pcap", "82599", "examples/dns_ntp.lpg")
	if code != 1 || out != "" {
		t.Errorf("missing capture: exit %d, out %q", code, out)
	}
	code, _, errs = dragonc(t, "trace", "82599", "examples/dns_ntp.lpg")
	if code != 2 || !strings.Contains(errs, "no frames") {
		t.Errorf("no frames: exit %d, %q", code, errs)
	}
	code, _, errs = dragonc(t, "trace", "--frame", "xyz", "82599", "examples/dns_ntp.lpg")
	if code != 1 || !strings.Contains(errs, "not hexadecimal") {
		t.Errorf("bad hex: exit %d, %q", code, errs)
	}
}

// TestFlagsAnywhere: flags may follow the arguments, single-dash long
// flags keep working, and -v/-w/-o stay short.
func TestFlagsAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"check", "examples/dns_ntp.lpg", "-v"},
		{"check", "-v", "examples/dns_ntp.lpg"},
		{"check", "examples/dns_ntp.lpg", "--verbose", "-long"},
		{"embed", "82599", "examples/dns_ntp.lpg", "-json"},
		{"nics", "-json"},
	} {
		if code, out, errs := dragonc(t, args...); code != 0 || out == "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q", args, code, len(out), errs)
		}
	}
}

// TestStdin: "-" is standard input for check, fmt, lpg and --pcap.
func TestStdin(t *testing.T) {
	stack, err := os.ReadFile("../../examples/dns_ntp.lpg")
	if err != nil {
		t.Fatal(err)
	}
	in := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		wd, _ := os.Getwd()
		os.Chdir("../..")
		defer os.Chdir(wd)
		code := run(args, bytes.NewReader(stack), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := in("check", "-v", "-"); code != 0 || !strings.HasPrefix(out, "<stdin>: stack dns_ntp: 2 endpoints") {
		t.Errorf("check -: exit %d, %q, %q", code, out, errs)
	}
	if code, out, _ := in("fmt", "-"); code != 0 || !strings.Contains(out, "stack dns_ntp {") {
		t.Errorf("fmt -: exit %d, %q", code, out)
	}
	if code, out, _ := in("lpg", "-"); code != 0 || !strings.HasPrefix(out, "stack dns_ntp: LPG with") {
		t.Errorf("lpg -: exit %d, %q", code, out)
	}
	stack = []byte("stack s {")
	if code, _, errs := in("check", "-"); code != 1 || !strings.HasPrefix(errs, "<stdin>:1:") {
		t.Errorf("check - on a broken stack: exit %d, %q", code, errs)
	}
	pcap, err := os.ReadFile("/usr/share/gocode/src/github.com/gopacket/gopacket/pcap/test_dns.pcap")
	if err != nil {
		t.Skip("gopacket's test captures are not installed (apt-get install golang-github-gopacket-gopacket-dev)")
	}
	stack = pcap
	code, out, errs := in("verify", "--fallback=false", "--packets", "0", "--pcap", "-", "82599", "testdata/captures/dns_server.lpg")
	if code != 0 || !strings.HasSuffix(out, "10 packets, 0 mismatches\n") {
		t.Errorf("verify --pcap -: exit %d, %q, %q", code, out, errs)
	}
	if code, out, _ := in("trace", "--fallback=false", "--pcap", "-", "82599", "testdata/captures/dns_server.lpg"); code != 0 || strings.Count(out, "outcome: deliver to dns") != 10 || !strings.Contains(out, "frame 10: stdin #10") {
		t.Errorf("trace --pcap -: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"--pcap", "-", "--pcap", "-", "82599", "testdata/captures/dns_server.lpg"}, {"--pcap", "-", "82599", "-"}} {
		if code, _, errs := in(append([]string{"verify"}, args...)...); code != 1 || !strings.Contains(errs, "standard input can be read once") {
			t.Errorf("verify %v: exit %d, %q", args, code, errs)
		}
	}
}

// TestJSONOutputs runs every command that has --json (found in the
// command tree, so a new one cannot be left out) and decodes standard
// output strictly: one JSON document and nothing after it, or for a
// stream one document per line. Text for people goes to standard error.
func TestJSONOutputs(t *testing.T) {
	dir := t.TempDir()
	tiny := filepath.Join(dir, "tiny.lpg")
	if err := os.WriteFile(tiny, []byte(tinyLPG), 0o644); err != nil {
		t.Fatal(err)
	}
	frame := func(port uint16) string {
		return hex.EncodeToString(packet.MustBuild(packet.Spec{DstMAC: net.HardwareAddr{0x00, 0x1b, 0x21, 0, 0, 1},
			Src: net.IP{198, 51, 100, 7}, Dst: net.IP{192, 0, 2, 10}, Proto: packet.ProtoUDP, SrcPort: 4000, DstPort: port}))
	}
	type row struct {
		args   []string
		code   int
		docs   int    // JSON documents on stdout (0: stdout is empty)
		ndjson bool   // a stream: one document a line
		stderr string // text for people expected on stderr
		check  func(t *testing.T, docs []any)
	}
	rows := map[string][]row{
		"check": {
			{args: []string{"check", "--json", "examples/dns_ntp.lpg", "testdata/bad/cycle.unicorn"}, code: 1, docs: 1, stderr: "1 error(s) in the input",
				check: func(t *testing.T, docs []any) {
					files, diags := obj(t, docs[0])["files"].([]any), obj(t, docs[0])["diagnostics"].([]any)
					if len(files) != 1 || len(diags) == 0 {
						t.Fatalf("check --json: %v", docs[0])
					}
					d := diags[0].(map[string]any)
					for _, k := range []string{"file", "line", "column", "code", "severity", "message"} {
						if _, ok := d[k]; !ok {
							t.Errorf("check --json diagnostic lacks %q: %v", k, d)
						}
					}
					if d["code"] != "E330" || d["severity"] != "error" || d["file"] != "testdata/bad/cycle.unicorn" {
						t.Errorf("check --json diagnostic: %v", d)
					}
				}},
			{args: []string{"check", "--json", "-v", "examples/dns_ntp.lpg"}, docs: 1},
		},
		"embed": {
			{args: []string{"embed", "--json", "82599", "examples/dns_ntp.lpg"}, docs: 1, stderr: "dragonc: warning: RxC5TupleFilter could steer 2 endpoint(s)",
				check: func(t *testing.T, docs []any) {
					if obj(t, docs[0])["schema_version"] != float64(1) || obj(t, docs[0])["dragonc_version"] == "" || obj(t, docs[0])["dragonc_version"] == nil {
						t.Errorf("plan.json: schema_version %v, dragonc_version %v", obj(t, docs[0])["schema_version"], obj(t, docs[0])["dragonc_version"])
					}
				}},
			{args: []string{"embed", "--json", "--cost", "cycles", "82576", "examples/dns_ntp.lpg"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if c := obj(t, docs[0])["cost"].(map[string]any); c["function"] != "cycles" {
						t.Errorf("--cost cycles: %v", c)
					}
				}},
			{args: []string{"embed", "--json", "82599", "no/such.lpg"}, code: 1, stderr: "no/such.lpg: no such file"},
		},
		"lpg": {
			{args: []string{"lpg", "--json", "examples/dns_ntp.lpg"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if obj(t, docs[0])["stack"] != "dns_ntp" || len(obj(t, docs[0])["endpoints"].([]any)) != 2 {
						t.Errorf("lpg --json: %v", docs[0])
					}
				}},
		},
		"nics": {
			{args: []string{"nics", "--json"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if len(obj(t, docs[0])["nics"].([]any)) < 4 {
						t.Error("nics --json lists too few models")
					}
				}},
		},
		"verify": {
			{args: []string{"verify", "--json", "--fallback=false", "--packets", "100", "82599", "examples/dns_ntp.lpg"}, docs: 1, stderr: "100 packets, 0 mismatches\n",
				check: func(t *testing.T, docs []any) {
					if obj(t, docs[0])["packets"] != float64(100) || obj(t, docs[0])["mismatches"] != float64(0) {
						t.Errorf("verify --json: %v", docs[0])
					}
				}},
			{args: []string{"verify", "--json", "--fallback=false", "--packets", "200", "82599", tiny}, code: 1, docs: 1, stderr: "mismatches\n"},
		},
		"trace": {
			{args: []string{"trace", "--json", "--fallback=false", "--frame", frame(53), "--frame", frame(123), "--frame", frame(9), "82599", "examples/dns_ntp.lpg"}, docs: 3, ndjson: true,
				check: func(t *testing.T, docs []any) {
					for i, want := range []string{"dns", "ntp", ""} {
						if obj(t, docs[i])["frame"] != float64(i+1) || obj(t, docs[i])["endpoint"] != want {
							t.Errorf("trace --json frame %d: %v", i+1, docs[i])
						}
					}
				}},
			{args: []string{"trace", "--json", "--fallback=false", "--frame", "02", "82599", tiny}, code: 1, docs: 1, ndjson: true, stderr: "1 of 1 frames are treated otherwise"},
		},
		"bench": {
			{args: []string{"bench", "--json", "--frames", "64", "82599", "examples/dns_ntp.lpg"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if obj(t, docs[0])["fallback_ns"].(float64) <= 0 || obj(t, docs[0])["stack"] != "dns_ntp" {
						t.Errorf("bench --json: %v", docs[0])
					}
				}},
		},
		// With no run on this host (an empty state directory), status is
		// an empty list and stop has nothing to do.
		"status": {
			{args: []string{"status", "--json"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if l, ok := docs[0].([]any); !ok || len(l) != 0 {
						t.Errorf("status --json with nothing running: %v", docs[0])
					}
				}},
			{args: []string{"status", "--json", "nosuch0"}, code: 1, docs: 1, stderr: "nothing serves nosuch0"},
		},
		"build": {
			{args: []string{"build", "--json", "linux-xdp", "examples/dns_ntp.lpg", "-o", filepath.Join(dir, "server")}, docs: 1, stderr: "dragonc build: wrote",
				check: func(t *testing.T, docs []any) {
					if o := obj(t, docs[0]); o["stack"] != "dns_ntp" || o["nic"] != "linux-xdp" || o["bytes"].(float64) <= 0 {
						t.Errorf("build --json: %v", docs[0])
					}
				}},
		},
		// Measuring needs root and a live peer (TestSoviaBench); without an
		// interface, one line on stderr and nothing on stdout.
		"sovia bench": {
			{args: []string{"sovia", "bench", "--json", "nosuch0", "[02:00:00:00:00:01]:7"}, code: 1, stderr: "nosuch0"},
			{args: []string{"sovia", "bench", "--json", "--spin", "-1us", "nosuch0", "[02:00:00:00:00:01]:7"}, code: 2, stderr: "--spin at least 0"},
		},
		// The reload of a live run is TestReloadCommand's.
		"reload": {
			{args: []string{"reload", "--json", "nosuch0"}, code: 2, stderr: "nothing runs on nosuch0"},
		},
		"stop": {
			{args: []string{"stop", "--json", "nosuch0"}, docs: 1,
				check: func(t *testing.T, docs []any) {
					if obj(t, docs[0])["iface"] != "nosuch0" {
						t.Errorf("stop --json: %v", docs[0])
					}
				}},
		},
	}
	t.Setenv("DRAGONC_RUN_DIR", filepath.Join(dir, "run"))
	t.Setenv("DRAGONC_BPF_DIR", filepath.Join(dir, "bpf"))
	// run serves an interface until it is stopped, as root: its --json
	// lines are the namespace tests' to check.
	skip := map[string]string{"run": "needs root and an interface"}
	var names []string
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader("")})
	walkCommands(root, func(c *cobra.Command) {
		if c.Flags().Lookup("json") == nil {
			return
		}
		name := strings.TrimPrefix(c.CommandPath(), "dragonc ")
		if _, ok := skip[name]; ok {
			return
		}
		if len(rows[name]) == 0 {
			t.Errorf("dragonc %s has --json but no row in TestJSONOutputs: add one", name)
		}
		names = append(names, name)
	})
	if len(names) < 7 {
		t.Fatalf("only %d commands with --json in the tree: %v", len(names), names)
	}
	for _, name := range names {
		for i, r := range rows[name] {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				if name == "bench" {
					if _, err := exec.LookPath("go"); err != nil {
						t.Skip("the go command is not installed: bench --json not run")
					}
				}
				code, out, errs := dragonc(t, r.args...)
				if code != r.code {
					t.Fatalf("dragonc %s: exit %d, want %d; stderr:\n%s", strings.Join(r.args, " "), code, r.code, errs)
				}
				if !strings.Contains(errs, r.stderr) {
					t.Errorf("dragonc %s: stderr lacks %q:\n%s", strings.Join(r.args, " "), r.stderr, errs)
				}
				var docs []any
				if r.ndjson {
					if out != "" && !strings.HasSuffix(out, "\n") {
						t.Errorf("the stream does not end with a newline: %q", out)
					}
					if out != "" {
						for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
							docs = append(docs, oneJSON(t, line))
						}
					}
				} else if out != "" {
					docs = append(docs, oneJSON(t, out))
				}
				if len(docs) != r.docs {
					t.Fatalf("%d JSON documents on stdout, want %d:\n%s", len(docs), r.docs, out)
				}
				if r.check != nil {
					r.check(t, docs)
				}
			})
		}
	}
}

// oneJSON decodes s, which must hold one JSON document and nothing after
// it but white space.
func oneJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var m any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	if rest := s[dec.InputOffset():]; strings.TrimSpace(rest) != "" {
		t.Fatalf("more after the JSON document: %q", rest)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("after the JSON document: %v, want the end", err)
	}
	return m
}

// obj is a JSON document that must be an object.
func obj(t *testing.T, doc any) map[string]any {
	t.Helper()
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("not a JSON object: %v", doc)
	}
	return m
}

func TestVersionAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := dragonc(t, args...)
		if code != 0 || !strings.HasPrefix(out, "dragonc ") || strings.Contains(out, "development build") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, _ := dragonc(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "dragonc") || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, len(out))
		}
	}
}

// TestEveryCommandDocumented: docs/cli.md names every command of the tree.
func TestEveryCommandDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader("")})
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		if !strings.Contains(string(b), "dragonc "+c.Name()) {
			t.Errorf("docs/cli.md does not document dragonc %s", c.Name())
		}
	}
}

// TestNoProgressOffTerminal: progress bars appear only on a terminal.
func TestNoProgressOffTerminal(t *testing.T) {
	code, _, errs := dragonc(t, "verify", "--packets", "5000", "--fallback=false", "82599", "examples/dns_ntp.lpg")
	if code != 0 || errs != "" {
		t.Errorf("exit %d, stderr %q; want nothing on a stderr that is not a terminal", code, errs)
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, quiet := range []bool{false, true} {
		if p := newProgress(&env{stderr: f}, quiet, 10, "x"); p.bar != nil {
			t.Errorf("a progress bar on a regular file (quiet %v)", quiet)
		}
	}
}

// TestFmtWriteKeepsLinks: fmt -w writes through a symbolic link, keeps a
// hard link shared and keeps the file's mode.
func TestFmtWriteKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.unicorn")
	if err := os.WriteFile(real, []byte("graph g {node A {port out[]}}"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.unicorn")
	hard := filepath.Join(dir, "hard.unicorn")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	if err := os.Link(real, hard); err != nil {
		t.Skip(err)
	}
	if code, _, errs := dragonc(t, "fmt", "-w", link); code != 0 {
		t.Fatal(errs)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the symbolic link became a file")
	}
	b, _ := os.ReadFile(hard)
	if !strings.Contains(string(b), "\n") {
		t.Errorf("the hard link does not see the new layout: %q", b)
	}
	if st, _ := os.Stat(real); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
}

// TestFmtWriteKeepsOwner: fmt -w run by root on another user's file
// leaves its owner, group and whole mode, setuid, setgid and sticky bits
// included. Other users can only check the mode.
func TestFmtWriteKeepsOwner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "theirs.unicorn")
	const mode = 0o754 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky
	if err := os.WriteFile(path, []byte("graph g {node A {port out[]}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(path, 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, mode); err != nil { // after chown, which clears setuid and setgid
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	if code, _, errs := dragonc(t, "fmt", "-w", path); code != 0 {
		t.Fatalf("fmt -w: exit %d: %s", code, errs)
	}
	if got, _ := os.ReadFile(path); string(got) != "graph g {\n    node A {\n        port out[]\n    }\n}\n" {
		t.Errorf("fmt -w wrote %q", got)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode() &^ os.ModeType; got != mode {
		t.Errorf("mode %v, want %v", got, mode)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("fmt -w left temporary files behind: %v", entries)
	}
	was, now := before.Sys().(*syscall.Stat_t), st.Sys().(*syscall.Stat_t)
	if was.Uid != now.Uid || was.Gid != now.Gid {
		t.Errorf("owner %d:%d, want %d:%d", now.Uid, now.Gid, was.Uid, was.Gid)
	}
	if !root {
		t.Skip("not root: the file is the test's own, so another user's ownership is not checked")
	}
	if now.Uid != 1234 || now.Gid != 5678 {
		t.Errorf("owner %d:%d, want 1234:5678", now.Uid, now.Gid)
	}
}

// TestFmtWriteOwnerUnkept: when the owner cannot be given to a new file
// (someone else's file, not root), fmt -w rewrites the file in place; any
// other failure leaves the file and no temporary file.
func TestFmtWriteOwnerUnkept(t *testing.T) {
	defer func(f func(*os.File, int, int) error) { chownFile = f }(chownFile)
	const src = "graph g {node A {port out[]}}"
	for _, c := range []struct {
		err  error
		code int
	}{
		{syscall.EPERM, 0},
		{syscall.EIO, 1},
	} {
		chownFile = func(f *os.File, uid, gid int) error {
			return &os.PathError{Op: "chown", Path: f.Name(), Err: c.err}
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "a.unicorn")
		if err := os.WriteFile(path, []byte(src), 0o640); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Stat(path)
		code, _, errs := dragonc(t, "fmt", "-w", path)
		if code != c.code {
			t.Errorf("%v: exit %d: %s", c.err, code, errs)
		}
		got, _ := os.ReadFile(path)
		st, _ := os.Stat(path)
		switch {
		case c.code != 0 && (string(got) != src || !strings.Contains(errs, "input/output error")):
			t.Errorf("%v: the file holds %q; stderr %q", c.err, got, errs)
		case c.code == 0 && (!strings.Contains(string(got), "\n") || !os.SameFile(before, st)):
			t.Errorf("%v: not rewritten in place: %q", c.err, got)
		}
		if st.Mode() != 0o640 {
			t.Errorf("%v: mode %v", c.err, st.Mode())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%v: temporary files left behind: %v", c.err, entries)
		}
	}
}

// TestEmbedSelfCheckWritesNothing: a plan that its own check rejects (a
// NIC taking unicast frames only drops the ARP broadcasts the LPG
// answers) makes embed fail loudly, and nothing is written: no output
// directory at all. verify still runs and shows the frames.
func TestEmbedSelfCheckWritesNothing(t *testing.T) {
	dir := t.TempDir()
	nic := filepath.Join(dir, "unicast.prg")
	const src = `graph unicast_only {
    cluster Rx {
        node L2Filter {
            port out[Queue0]
            predicate out "eth.dst & 0x010000000000 == 0"
        }
        node Queue0 {
            attr "source"
            port out[]
        }
    }
}
`
	if err := os.WriteFile(nic, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, _, errs := dragonc(t, "embed", "-q", nic, "examples/dns_ntp.lpg", "-o", out)
	if code != 1 || !strings.Contains(errs, "self-check: the plan treats") || !strings.Contains(errs, "nothing is written") {
		t.Errorf("embed: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed self-check: %v", out, err)
	}
	code, stdout, _ := dragonc(t, "verify", "-q", "--packets", "300", "--fallback=false", nic, "examples/dns_ntp.lpg")
	if code != 1 || !strings.Contains(stdout, "mismatch") {
		t.Errorf("verify: exit %d, %q", code, stdout)
	}
}

// TestRunFlagValues: run's choices are checked before anything is
// planned or opened: a wrong one is a usage error (exit 2) naming the
// choices.
func TestRunFlagValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--xdp-mode", "native"}, `--xdp-mode "native": want auto, driver, generic`},
		{[]string{"--xdp-tx", "yes"}, `--xdp-tx "yes": want auto, on, off`},
		{[]string{"--socket", "raw"}, `--socket "raw": want`},
	} {
		args := append(append([]string{"run"}, c.args...), "linux-xdp", "examples/dns_ntp.lpg", "nosuch0")
		code, out, errs := dragonc(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("dragonc %s: exit %d, stdout %q, stderr %q; want 2 and %q", strings.Join(args, " "), code, out, errs, c.want)
		}
	}
}

package main

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/nics"
	drun "github.com/dragonc/dragonc/run"
)

// shadowStack has a diagnostic warning (d is shadowed) and plan warnings
// (applications on cores their packets are not all served on).
const shadowStack = `stack shadow {
    interface eth0 { mac 00:1b:21:00:00:01 ip 192.0.2.10/24 }
    cores 0..3
    endpoint c tcp listen 192.0.2.10:80 { core 3 }
    endpoint d tcp listen *:80
    endpoint dns udp listen *:53 { cores 0..1 }
    endpoint rank openmx 3 { core 3 }
}
`

// TestEmbedWarningsOnce: embed prints each warning once, on standard
// error, whatever goes to standard output; --quiet prints none and leaves
// the result as it was.
func TestEmbedWarningsOnce(t *testing.T) {
	stack := filepath.Join(t.TempDir(), "shadow.lpg")
	if err := os.WriteFile(stack, []byte(shadowStack), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{nil, {"--json"}, {"-o", filepath.Join(t.TempDir(), "out")}} {
		args := append(append([]string{"embed"}, mode...), "82599", stack)
		code, out, errs := dragonc(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var warnings []string
		for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
			_, w, ok := strings.Cut(line, "warning: ")
			if !ok {
				t.Errorf("%v: a line on stderr that is no warning: %q", args, line)
				continue
			}
			warnings = append(warnings, w)
		}
		if len(warnings) < 2 || !strings.Contains(errs, `endpoint "d" can never receive a packet`) || !strings.Contains(errs, "endpoint rank runs on cores 3 but is served on core 0, not its own: no rule of 82599 (as ixgbe exposes it) matches its packets") {
			t.Errorf("%v: warnings missing from stderr:\n%s", args, errs)
		}
		for _, w := range warnings {
			if n := strings.Count(errs, w); n != 1 {
				t.Errorf("%v: warning on stderr %d times: %s", args, n, w)
			}
			if mode == nil && strings.Contains(out, w) {
				t.Errorf("%v: the report repeats the warning %q", args, w)
			}
		}
		qcode, qout, qerrs := dragonc(t, append([]string{args[0], "--quiet"}, args[1:]...)...)
		if qcode != 0 || qerrs != "" {
			t.Errorf("%v --quiet: exit %d, stderr %q", args, qcode, qerrs)
		}
		if len(mode) == 0 && qout != out {
			t.Errorf("%v --quiet changed the report", args)
		}
	}
	// An error is still said under --quiet.
	if code, _, errs := dragonc(t, "embed", "-q", "82599", "no/such.lpg"); code != 1 || !strings.Contains(errs, "no/such.lpg: no such file") {
		t.Errorf("--quiet on a missing file: exit %d, %q", code, errs)
	}
}

// TestExplainEndpoint: --explain takes an endpoint's name as well as an
// LPG node's, and an unknown name gets close matches.
func TestExplainEndpoint(t *testing.T) {
	code, out, errs := dragonc(t, "embed", "--explain", "dns", "82599", "examples/dns_ntp.lpg")
	if code != 0 || !strings.HasPrefix(out, "endpoint dns (udp listen *:53): delivered by LPG node RxL4UDPSocket_dns\n") || !strings.Contains(out, "\nRxL4UDPDemux [dns]: software\n") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, errs = dragonc(t, "embed", "--explain", "UDPDemux", "82599", "examples/dns_ntp.lpg")
	if code != 1 || out != "" || !strings.Contains(errs, `dragonc: "UDPDemux" is not an LPG node or an endpoint of stack dns_ntp; did you mean "RxL4UDPDemux"?`) {
		t.Errorf("unknown name: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// tinyLPG is an explicit LPG without the length check the 82599 makes:
// verify and trace find frames the embedding treats otherwise.
const tinyLPG = `graph tiny {
    node RxQueue { attr "source" port out[RxL2EtherValidCRC] }
    boolean RxL2EtherValidCRC {
        port true[RxDeliver]
        port false[]
        predicate true "frame.crc_ok"
    }
    node RxDeliver { attr "endpoint=all" }
}
`

// TestNonZeroExitSaysWhy: every command line that exits non-zero says why
// on standard error: bad command lines of every command, and for every
// command of the tree an unknown flag.
func TestNonZeroExitSaysWhy(t *testing.T) {
	dir := t.TempDir()
	tiny := filepath.Join(dir, "tiny.lpg")
	if err := os.WriteFile(tiny, []byte(tinyLPG), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := [][]string{
		{},
		{"nosuch"},
		{"help", "nosuch"},
		{"version", "extra"},
		{"completion", "tcsh"},
		{"completion"},
		{"check"},
		{"check", "no/such.lpg"},
		{"check", "testdata/bad/cycle.unicorn"},
		{"check", "--json", "testdata/bad/cycle.unicorn"},
		{"check", "--json", "no/such.lpg"},
		{"fmt", "testdata/bad/missing_bracket.unicorn"},
		{"fmt", "-w", "no/such.prg"},
		{"nics", "extra"},
		{"dot", "nosuch"},
		{"dot", "testdata/bad/cycle.unicorn"},
		{"lpg", "testdata/graphs/filters.unicorn"},
		{"lpg", "--json", "no/such.lpg"},
		{"embed", "examples/dns_ntp.lpg", "examples/dns_ntp.lpg"},
		{"embed", "--copy-engine", "examples/dns_ntp.lpg", "82599", "examples/dns_ntp.lpg"},
		{"embed", "--copy-engine", "82599", "82599", "examples/dns_ntp.lpg"},
		{"embed", "ioat", "examples/dns_ntp.lpg"},
		{"embed", "--json", "82599", "no/such.lpg"},
		{"embed", "--quiet", "82599", "testdata/badstack/openmx_id.lpg"},
		{"embed", "--explain", "nosuch", "82599", "examples/dns_ntp.lpg"},
		{"embed", "--previous", "no/such.json", "--strategy", "incremental", "82599", "examples/dns_ntp.lpg"},
		{"embed", "--cost", "speed", "82599", "examples/dns_ntp.lpg"},
		{"verify", "-q", "--fallback=false", "--packets", "200", "82599", tiny},
		{"verify", "--json", "--fallback=false", "--packets", "200", "82599", tiny},
		{"verify", "--pcap", "no/such.pcap", "82599", "examples/dns_ntp.lpg"},
		{"trace", "--fallback=false", "--frame", "02", "82599", tiny},
		{"trace", "--json", "--fallback=false", "--frame", "02", "82599", tiny},
		{"trace", "--frame", "xyz", "82599", "examples/dns_ntp.lpg"},
		{"trace", "82599", "examples/dns_ntp.lpg"},
		{"bench", "--frames", "0", "82599", "examples/dns_ntp.lpg"},
		{"bench", "82599", "no/such.lpg"},
		{"discover"},
		{"discover", "a/b"},
		{"run", "--socket", "bogus", "linux-xdp", "examples/dns_ntp.lpg", "veth0"},
	}
	// Every command of the tree, with a flag none has.
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader("")})
	walkCommands(root, func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		lines = append(lines, append(path, "--no-such-flag"))
	})
	for _, args := range lines {
		code, _, errs := dragonc(t, args...)
		if code == 0 {
			t.Errorf("dragonc %s: exit 0, want an error", strings.Join(args, " "))
			continue
		}
		if strings.TrimSpace(errs) == "" {
			t.Errorf("dragonc %s: exit %d with nothing on stderr", strings.Join(args, " "), code)
		}
	}
}

// walkCommands calls f on every command under root.
func walkCommands(root *cobra.Command, f func(*cobra.Command)) {
	for _, c := range root.Commands() {
		f(c)
		walkCommands(c, f)
	}
}

// complete asks for the completions of a command line whose last word is
// being typed, as the shell scripts do (dragonc __complete ...), and
// returns the candidates and cobra's directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	code, out, errs := dragonc(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if code != 0 || !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete %q: exit %d, stdout %q, stderr %q", args, code, out, errs)
	}
	return lines[:len(lines)-1], cobra.ShellCompDirective(d)
}

// TestCompletion: NIC arguments complete to the built-in models, file
// arguments to files of their kind, and enumerations to the values their
// flags are checked against, on every command that has the flag.
func TestCompletion(t *testing.T) {
	const (
		noFiles = cobra.ShellCompDirectiveNoFileComp
		exts    = cobra.ShellCompDirectiveFilterFileExt
		dirs    = cobra.ShellCompDirectiveFilterDirs
	)
	check := func(args []string, want []string, wantD cobra.ShellCompDirective) {
		t.Helper()
		got, d := complete(t, args...)
		if !slices.Equal(got, want) || d != wantD {
			t.Errorf("complete %q: %q, directive %d; want %q, %d", args, got, d, want, wantD)
		}
	}
	for _, cmd := range []string{"embed", "verify", "trace", "bench", "run"} {
		check([]string{cmd, ""}, nics.Names(), noFiles)
		check([]string{cmd, "8259"}, []string{"82599"}, noFiles)
		check([]string{cmd, "my/"}, []string{"prg", "unicorn"}, exts)
		check([]string{cmd, "82599", ""}, []string{"lpg"}, exts)
	}
	check([]string{"embed", "82599", "examples/dns_ntp.lpg", ""}, nil, noFiles)
	check([]string{"dot", ""}, nics.Names(), noFiles)
	check([]string{"dot", "x"}, []string{"prg", "unicorn", "lpg"}, exts)
	check([]string{"check", "a.lpg", "b.prg", ""}, []string{"prg", "unicorn", "lpg"}, exts)
	check([]string{"fmt", ""}, []string{"prg", "unicorn", "lpg"}, exts)
	check([]string{"lpg", ""}, []string{"lpg"}, exts)
	check([]string{"nics", ""}, nil, noFiles)
	check([]string{"embed", "-o", ""}, nil, dirs)
	check([]string{"discover", "-o", ""}, []string{"prg", "unicorn"}, exts)
	check([]string{"verify", "--pcap", ""}, []string{"pcap", "pcapng"}, exts)
	check([]string{"embed", "--previous", ""}, []string{"json"}, exts)
	check([]string{"verify", "--packets", ""}, nil, noFiles)
	if ifs, err := net.Interfaces(); err == nil && len(ifs) > 0 {
		got, _ := complete(t, "discover", "")
		if !slices.Contains(got, ifs[0].Name) {
			t.Errorf("discover completes to %q, not interface %s", got, ifs[0].Name)
		}
	}
	// Every command with an enumerated flag completes it to the values
	// its check accepts.
	enums := map[string][]string{"cost": costmodel.Names(), "strategy": embed.Strategies(), "target": embed.Targets(), "socket": drun.Sockets()}
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader("")})
	n := 0
	walkCommands(root, func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		for flag, want := range enums {
			if c.Flags().Lookup(flag) != nil {
				check(append(path, "--"+flag, ""), want, noFiles)
				n++
			}
		}
		if c.Flags().Lookup("copy-engine") != nil {
			got, d := complete(t, append(path, "--copy-engine", "")...)
			if !slices.Contains(got, "none") || !slices.Contains(got, "ioat") || slices.Contains(got, "82599") || d != noFiles {
				t.Errorf("%s --copy-engine completes to %q, %d", c.CommandPath(), got, d)
			}
		}
	})
	if n < 15 {
		t.Errorf("only %d enumerated flags completed", n)
	}
	check([]string{"embed", "--cost", "dragonet-"}, []string{"dragonet-balance", "dragonet-priority"}, noFiles)
	// Each value completed is one the flags' check accepts.
	for flag, vals := range enums {
		if flag == "socket" {
			continue // run's own flag: its check is drun.Sockets itself
		}
		for _, v := range vals {
			var f embedFlags
			fs := pflag.NewFlagSet("embed", pflag.ContinueOnError)
			f.register(fs)
			if err := errors.Join(fs.Set(flag, v), fs.Set("previous", "plan.json")); err != nil {
				t.Fatal(err)
			}
			if err := f.validate(); err != nil {
				t.Errorf("--%s %s completes but is refused: %v", flag, v, err)
			}
		}
	}
	// --explain completes to the stack's endpoints and LPG nodes.
	got, _ := complete(t, "embed", "82599", "examples/dns_ntp.lpg", "--explain", "")
	if !slices.Contains(got, "dns") || !slices.Contains(got, "RxL4UDPDemux") {
		t.Errorf("--explain completes to %q", got)
	}
	check([]string{"embed", "82599", "examples/dns_ntp.lpg", "--explain", "RxL4UDPD"}, []string{"RxL4UDPDemux"}, noFiles)
}

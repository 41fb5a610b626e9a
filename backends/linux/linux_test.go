package linux_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/backends/linux/linuxtest"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/golden"
)

var root = func() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}()

func examples(t *testing.T) []string {
	m, err := filepath.Glob(filepath.Join(root, "examples", "*.lpg"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return m
}

var (
	// The rows of the script's step table: a rule's words after
	// flow-type, the channel count.
	ruleLine    = regexp.MustCompile(`(?m)^ *\d+ add_rule +\d+ \d+ (\S+ .*)$`)
	combinedArg = regexp.MustCompile(`(?m)^ *\d+ set_channels +(\d+)$`)
	maskWords   = regexp.MustCompile(`(src-ip|dst-ip|src-port|dst-port) \S+( m \S+)?`)
)

// shape is what ixgbe compares between rules: which fields a rule
// matches, with which masks (the values do not matter).
func shape(rule string) string {
	var parts []string
	for _, m := range maskWords.FindAllStringSubmatch(rule, -1) {
		parts = append(parts, m[1]+m[2])
	}
	return strings.Join(parts, " ")
}

// TestLinuxTargetUsesOnlyDriverFeatures checks, for every built-in NIC
// with a Linux driver and every example, that the script asks the driver
// only for what its source says it accepts.
func TestLinuxTargetUsesOnlyDriverFeatures(t *testing.T) {
	for _, nic := range []string{"82599", "82576", "myri10g", "tigon"} {
		for _, ex := range examples(t) {
			t.Run(nic+"/"+filepath.Base(ex), func(t *testing.T) {
				r, _ := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, embed.TargetLinux)
				d := r.Driver()
				if r.Plan.Target != "linux" || r.Plan.Driver != d.Name {
					t.Fatalf("plan target %q driver %q", r.Plan.Target, r.Plan.Driver)
				}
				script := linux.Script(r, ex)
				rules := ruleLine.FindAllStringSubmatch(script, -1)
				switch d.Name {
				case "igb", "myri10ge", "acenic":
					// igb on the 82576 has no ntuple (igb_probe), the others no
					// set_rxnfc at all.
					if len(rules) > 0 {
						t.Errorf("%s gets %d ethtool -N rules, e.g. %s", d.Name, len(rules), rules[0][1])
					}
				case "ixgbe":
					if len(rules) > 2046 {
						t.Errorf("%d rules; ixgbe takes 2046 with the default packet buffer split", len(rules))
					}
					for _, m := range rules {
						if shape(m[1]) != shape(rules[0][1]) {
							t.Errorf("ixgbe takes one mask per port; rule %q and rule %q differ", rules[0][1], m[1])
							break
						}
						if !regexp.MustCompile(`^(tcp4|udp4|sctp4|ip4) `).MatchString(m[1]) {
							t.Errorf("flow type ixgbe does not take: %s", m[1])
						}
					}
				}
				for _, m := range combinedArg.FindAllStringSubmatch(script, -1) {
					if n, _ := strconv.Atoi(m[1]); d.MaxChannels > 0 && n > d.MaxChannels {
						t.Errorf("ethtool -L combined %d; %s allows %d", n, d.Name, d.MaxChannels)
					}
				}
				for _, q := range r.Plan.Queues {
					if d.MaxChannels > 0 && q.ID >= d.MaxChannels {
						t.Errorf("queue %d used; %s has %d channels", q.ID, d.Name, d.MaxChannels)
					}
				}
				for _, c := range r.Plan.Config {
					if c.Kind == "table" && len(c.Entries) > 0 {
						if _, ok := d.Tables[c.Node]; !ok {
							t.Errorf("plan fills %s, which %s does not expose", c.Node, d.Name)
						}
					}
				}
			})
		}
	}
}

// fakeNIC is a fake interface for the scripts (linuxtest.NIC).
type fakeNIC = linuxtest.NIC

func newFake(t *testing.T, driver string, channels int) *fakeNIC {
	return linuxtest.New(t, driver, channels)
}

func writeScript(t *testing.T, nic, example string, cost costmodel.Function) string {
	t.Helper()
	_, p := planScript(t, nic, example, cost)
	return p
}

// planScript is writeScript that also returns the plan.
func planScript(t *testing.T, nic, example string, cost costmodel.Function) (*embed.Result, string) {
	t.Helper()
	r, _ := embedtest.PlanTarget(t, nic, filepath.Join(root, "examples", example), cost, embed.TargetLinux)
	p := filepath.Join(t.TempDir(), "linux.sh")
	if err := os.WriteFile(p, []byte(linux.Script(r, example)), 0o755); err != nil {
		t.Fatal(err)
	}
	return r, p
}

// rules is the cost under which web_and_dns's plan on the 82599 has a
// hundred Flow Director rules and uses eight queues: priority keeps the
// gold endpoint's queue of its own (balance spreads its four cores' worth
// by RSS, and the rest with it).
var rules = costmodel.Priority{}

// TestScriptRefusedRule: the driver refuses the third rule while ethtool
// exits 0, as the real one does. The script must see it by reading the
// table back, name the step, undo everything it applied and exit 1.
func TestScriptRefusedRule(t *testing.T) {
	script := writeScript(t, "82599", "web_and_dns.lpg", rules)
	f := newFake(t, "ixgbe", 4)
	before := f.Snapshot(t)
	out, code := f.Run(t, script, []string{"FAKE_REFUSE_RULE=3"}, "eth0")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if !regexp.MustCompile(`step \d+/\d+: filter rule 2 .* failed: rule 2 is not in the NIC's table`).MatchString(out) {
		t.Errorf("the failed step is not named:\n%s", out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("the failed run left changes behind:\nbefore\n%s\nafter\n%s\noutput:\n%s", before, after, out)
	}
	if _, err := os.Stat(f.State); !os.IsNotExist(err) {
		t.Errorf("the record of the failed run was kept: %v", err)
	}
}

// TestScriptApplyAndUndo applies a plan and restores the old settings.
func TestScriptApplyAndUndo(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	script := writeScript(t, "82599", "web_and_dns.lpg", rules)
	f := newFake(t, "ixgbe", 4)
	before := f.Snapshot(t)
	out, code := f.Run(t, script, nil, "eth0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if f.Read(t, "ntuple-filters") != "on" || f.Read(t, "udp4") != "sdfn" || f.Read(t, "channels") != "8" {
		t.Errorf("not applied:\n%s", f.Snapshot(t))
	}
	rules, _ := filepath.Glob(filepath.Join(f.Dir, "rule.*"))
	if len(rules) == 0 {
		t.Error("no rule written")
	}
	// A second run without --undo first is refused: it would record the
	// applied state as the one to restore.
	if out, code := f.Run(t, script, nil, "eth0"); code != 1 || !strings.Contains(out, "--undo") {
		t.Errorf("second run: exit %d:\n%s", code, out)
	}
	out, code = f.Run(t, script, nil, "--undo", "eth0")
	if code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestScriptChecksDriver: another driver stops the script before any
// change unless --force.
func TestScriptChecksDriver(t *testing.T) {
	script := writeScript(t, "82599", "dns_ntp.lpg", costmodel.Balance{})
	f := newFake(t, "e1000e", 4)
	before := f.Snapshot(t)
	out, code := f.Run(t, script, nil, "eth0")
	if code != 1 || !strings.Contains(out, "driven by 'e1000e', this plan is for ixgbe") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if f.Snapshot(t) != before || f.Read(t, "log") != "-i eth0" {
		t.Errorf("changed something before the driver check: log %q", f.Read(t, "log"))
	}
	if out, code := f.Run(t, script, nil, "--help"); code != 0 || !strings.HasPrefix(out, "usage: linux.sh") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
	if out, code := f.Run(t, script, nil, "--frobnicate", "eth0"); code != 2 || !strings.Contains(out, "unknown option --frobnicate") {
		t.Errorf("unknown option: exit %d:\n%s", code, out)
	}
}

// TestScriptOnVeth runs the 82599 script, forced, against the real
// ethtool on a veth pair inside a network namespace the test makes: the
// veth driver refuses what an ixgbe would take. The script must stop with
// exit 1, say why, and leave the interface as it found it.
func TestScriptOnVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("ethtool is not installed")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare is not installed")
	}
	script := writeScript(t, "82599", "web_and_dns.lpg", rules)
	state := filepath.Join(t.TempDir(), "veth.undo")
	// Everything happens in a namespace of its own: the veth pair goes
	// away with it when the shell exits.
	inner := `set -e
ip link add v0 type veth peer name v1
ip link set v0 up
ip link set v1 up
before="$(ethtool -l v0 2>&1; ethtool -k v0 2>&1)"
rc=0
sh "$1" --force v0 || rc=$?
after="$(ethtool -l v0 2>&1; ethtool -k v0 2>&1)"
echo "exit=$rc"
if [ "$before" = "$after" ]; then echo same; else echo changed; printf '%s\n----\n%s\n' "$before" "$after"; fi
# Then every ethtool command of the script, one by one: the veth may
# refuse a feature, but never the syntax.
sh "$1" --dry-run v0 | grep '^ethtool ' | while IFS= read -r line; do
    out=$(eval "$line" 2>&1) || true
    case "$out" in
    *"bad command line"* | *"Usage:"* | *"unknown"* | *"invalid"*) echo "SYNTAX: $line: $out" ;;
    esac
    echo "ran: $line"
done
`
	cmd := exec.Command("unshare", "-n", "sh", "-c", inner, "sh", script)
	cmd.Env = append(os.Environ(), "DRAGONC_STATE="+state)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot make a namespace with a veth pair here: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "exit=1") {
		t.Errorf("the script did not fail on a veth:\n%s", s)
	}
	if !strings.Contains(s, "same") {
		t.Errorf("the failed run left changes on the veth:\n%s", s)
	}
	if strings.Contains(s, "SYNTAX:") {
		t.Errorf("ethtool refused the syntax of a command:\n%s", s)
	}
	if !strings.Contains(s, "ran: ethtool -N v0 flow-type") {
		t.Errorf("the rules were not tried one by one:\n%s", s)
	}
	if !regexp.MustCompile(`step \d+/\d+: .* failed: `).MatchString(s) {
		t.Errorf("no failed step named:\n%s", s)
	}
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	t.Logf("veth run:\n%s", s)
}

// TestLinuxGoldens keeps the scripts of plans made for the Linux drivers
// under review (go test ./... -update rewrites them); the 82599's is the
// plan with Flow Director rules (rules).
func TestLinuxGoldens(t *testing.T) {
	for _, c := range []struct {
		nic, example string
		cost         costmodel.Function
	}{{"82599", "web_and_dns.lpg", rules}, {"82576", "web_and_dns.lpg", costmodel.Balance{}}, {"myri10g", "mpi_openmx.lpg", costmodel.Balance{}}} {
		r, _ := embedtest.PlanTarget(t, c.nic, filepath.Join(root, "examples", c.example), c.cost, embed.TargetLinux)
		golden.Check(t, filepath.Join("testdata", c.nic+"-"+strings.TrimSuffix(c.example, ".lpg")+".linux.sh.golden"), []byte(linux.Script(r, "examples/"+c.example)))
	}
}

// TestScriptKeepGoing: with --keep-going a refused rule is reported as
// "refused N: why", where N is its place in Steps, the other steps are
// applied, and --undo restores everything.
func TestScriptKeepGoing(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	r, _ := embedtest.PlanTarget(t, "82599", filepath.Join(root, "examples", "web_and_dns.lpg"), rules, embed.TargetLinux)
	script := filepath.Join(t.TempDir(), "linux.sh")
	if err := os.WriteFile(script, []byte(linux.Script(r, "web_and_dns.lpg")), 0o755); err != nil {
		t.Fatal(err)
	}
	steps := linux.Steps(r)
	f := newFake(t, "ixgbe", 4)
	before := f.Snapshot(t)
	out, code := f.Run(t, script, []string{"FAKE_REFUSE_RULE=3"}, "--keep-going", "eth0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	refused := regexp.MustCompile(`(?m)^refused (\d+): (.*)$`).FindAllStringSubmatch(out, -1)
	if len(refused) != 1 {
		t.Fatalf("want one refused step, got %q:\n%s", refused, out)
	}
	var n int
	fmt.Sscan(refused[0][1], &n)
	if n < 1 || n > len(steps) || steps[n-1].Kind != linux.StepRule {
		t.Fatalf("refused step %d is not a rule (%d steps)", n, len(steps))
	}
	// The third rule written is rule 2; Steps names its table entry.
	first := slices.IndexFunc(steps, func(s linux.Step) bool { return s.Kind == linux.StepRule })
	if n-1 != first+2 || steps[n-1].Node != "RxCFDir" || steps[n-1].Entry.Action == "" {
		t.Errorf("refused step %d: %+v (first rule at step %d)", n, steps[n-1], first+1)
	}
	if !strings.Contains(refused[0][2], "rule 2 is not in the NIC's table") {
		t.Errorf("reason: %q", refused[0][2])
	}
	if !strings.Contains(out, fmt.Sprintf("applied %d of %d steps", len(steps)-1, len(steps))) {
		t.Errorf("no summary:\n%s", out)
	}
	if f.Read(t, "channels") != "8" || f.Read(t, "ntuple-filters") != "on" {
		t.Errorf("the accepted steps were not applied:\n%s", f.Snapshot(t))
	}
	if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestChecksumSwitchesByFeature: the script finds a model's checksum
// switches by their feature property, not their names: the 82599 with
// its switches renamed gets the same ethtool -K steps.
func TestChecksumSwitchesByFeature(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "nics", "82599.prg"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer("CsumOffload", "VerifySums", "CsumInsert", "FillSums").Replace(string(src))
	path := filepath.Join(t.TempDir(), "renamed.prg")
	if err := os.WriteFile(path, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	features := regexp.MustCompile(`(?m)^ *\d+ set_feature +(rx|tx) \S+ (on|off)$`)
	ex := filepath.Join(root, "examples", "dns_ntp.lpg")
	var got [2][]string
	for i, nic := range []string{"82599", path} {
		r, _ := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, embed.TargetSilicon)
		for _, m := range features.FindAllStringSubmatch(linux.Script(r, "dns_ntp.lpg"), -1) {
			got[i] = append(got[i], m[1]+" "+m[2])
		}
	}
	if len(got[0]) != 2 || !slices.Equal(got[0], got[1]) {
		t.Errorf("checksum steps: the 82599 %q, renamed %q", got[0], got[1])
	}
	if !slices.Contains(got[0], "rx on") {
		t.Errorf("the 82599 does not verify receive checksums: %q", got[0])
	}
}

// planQueues is the number of receive queues a plan uses.
func planQueues(r *embed.Result) int {
	nq := 1
	for _, q := range r.Plan.Queues {
		nq = max(nq, q.ID+1)
	}
	return nq
}

// TestScriptEveryDriver runs the script of every example, for every
// built-in NIC with a Linux driver, against the fake ethtool acting as
// that driver: it refuses what the driver has no operation for, and its
// /proc/interrupts names the interrupts as the driver does. Every script
// must apply completely, bind each planned interrupt, and undo.
func TestScriptEveryDriver(t *testing.T) {
	for _, c := range []struct{ nic, driver string }{{"82599", "ixgbe"}, {"82576", "igb"}, {"myri10g", "myri10ge"}, {"tigon", "acenic"}} {
		for _, ex := range examples(t) {
			t.Run(c.nic+"/"+filepath.Base(ex), func(t *testing.T) {
				t.Parallel()
				r, _ := embedtest.PlanTarget(t, c.nic, ex, costmodel.Balance{}, embed.TargetLinux)
				script := filepath.Join(t.TempDir(), "linux.sh")
				if err := os.WriteFile(script, []byte(linux.Script(r, filepath.Base(ex))), 0o755); err != nil {
					t.Fatal(err)
				}
				nq := planQueues(r)
				f := newFake(t, c.driver, nq)
				before := f.Snapshot(t)
				out, code := f.Run(t, script, nil, "eth0")
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, out)
				}
				for _, q := range r.Plan.Queues {
					a, err := os.ReadFile(filepath.Join(f.Proc, "irq", fmt.Sprint(100+q.ID), "smp_affinity_list"))
					if err != nil || strings.TrimSpace(string(a)) != fmt.Sprint(q.Core) {
						t.Errorf("queue %d's interrupt is on %q, want core %d (%v)", q.ID, a, q.Core, err)
					}
				}
				f.CheckMasks(t, r)
				if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
					t.Fatalf("undo: exit %d:\n%s", code, out)
				}
				if after := f.Snapshot(t); after != before {
					t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
				}
			})
		}
	}
}

// TestScriptMyri10geModuleParameters: myri10ge fixes its slice count and
// its hash when it loads. A driver loaded with other values stops the
// script at the check, which says how to reload it.
func TestScriptMyri10geModuleParameters(t *testing.T) {
	r, _ := embedtest.PlanTarget(t, "myri10g", filepath.Join(root, "examples", "mpi_openmx.lpg"), costmodel.Balance{}, embed.TargetLinux)
	script := filepath.Join(t.TempDir(), "linux.sh")
	if err := os.WriteFile(script, []byte(linux.Script(r, "mpi_openmx.lpg")), 0o755); err != nil {
		t.Fatal(err)
	}
	nq := planQueues(r)
	if nq < 2 {
		t.Fatalf("the plan uses %d slice(s); the test needs more", nq)
	}
	hasHash := false
	for _, c := range r.Plan.Config {
		hasHash = hasHash || c.Node == "RxCIPHash" && len(c.Indirection) > 0
	}
	// Fewer slices than planned.
	f := newFake(t, "myri10ge", nq/2)
	out, code := f.Run(t, script, nil, "eth0")
	if code != 1 || !strings.Contains(out, fmt.Sprintf("modprobe myri10ge myri10ge_max_slices=%d", nq)) {
		t.Errorf("too few slices: exit %d:\n%s", code, out)
	}
	// Another hash type (2: TCP_IPV4, Toeplitz over addresses and TCP ports).
	f = newFake(t, "myri10ge", nq)
	if err := os.Chmod(filepath.Join(f.Sys, "module", "myri10ge", "parameters", "myri10ge_rss_hash"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Sys, "module", "myri10ge", "parameters", "myri10ge_rss_hash"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = f.Run(t, script, nil, "eth0")
	switch {
	case hasHash && (code != 1 || !strings.Contains(out, "myri10ge_rss_hash=5")):
		t.Errorf("another hash: exit %d:\n%s", code, out)
	case !hasHash && code != 0:
		t.Errorf("the plan does not hash, yet the hash type stopped it: exit %d:\n%s", code, out)
	}
	// No step asks ethtool for what myri10ge_ethtool_ops lacks.
	out, code = f.Run(t, script, nil, "--dry-run", "eth0")
	if m := regexp.MustCompile(`(?m)^ethtool -[LXN] .*$`).FindString(out); code != 0 || m != "" {
		t.Errorf("--dry-run: exit %d; the script asks myri10ge for %q:\n%s", code, m, out)
	}
}

// TestBindEachRank: the ranks of an MPI job (one process per endpoint,
// each with a core of its own) get one binding line each, on the core
// that serves their queue (Open-MX paper, section 3.2); when one queue
// serves them all (myri10ge cannot hash Open-MX endpoints), each keeps
// its own core instead of piling on that queue's core.
func TestBindEachRank(t *testing.T) {
	line := regexp.MustCompile(`(?m)^printf 'bind %s to cores %s \(taskset -acp %s PID\)\\n' 'mpi \(the process of endpoint (rank\d)\)' '([\d,]+)'`)
	for _, target := range []string{embed.TargetLinux, embed.TargetSilicon} {
		r, _ := embedtest.PlanTarget(t, "myri10g", filepath.Join(root, "examples", "mpi_openmx.lpg"), costmodel.Balance{}, target)
		got := map[string]string{}
		for _, m := range line.FindAllStringSubmatch(linux.Script(r, "mpi_openmx.lpg"), -1) {
			got[m[1]] = m[2]
		}
		if len(got) != 8 {
			t.Errorf("%s: %d rank lines, want 8: %v", target, len(got), got)
		}
		cores := map[string]bool{}
		for _, e := range r.Plan.Endpoints {
			c, ok := got[e.Name]
			if !ok {
				continue
			}
			if cores[c] {
				t.Errorf("%s: two ranks bound to core %s: %v", target, c, got)
			}
			cores[c] = true
			// A rank alone on its queue runs on that queue's core.
			alone := true
			for _, o := range r.Plan.Endpoints {
				if o.Name != e.Name && o.App == e.App && slices.Equal(o.IRQCores, e.IRQCores) {
					alone = false
				}
			}
			if alone && c != fmt.Sprint(e.IRQCores[0]) {
				t.Errorf("%s: %s alone on its queue is bound to core %s, its queue's interrupt is on %v", target, e.Name, c, e.IRQCores)
			}
		}
	}
}

// TestCPUMask: one core's mask as bitmap_parse reads it, a comma between
// 32-bit groups.
func TestCPUMask(t *testing.T) {
	for core, want := range map[int]string{0: "1", 1: "2", 4: "10", 31: "80000000", 32: "1,00000000", 35: "8,00000000", 64: "1,00000000,00000000"} {
		if got := linux.CPUMask(core); got != want {
			t.Errorf("CPUMask(%d) = %q, want %q", core, got, want)
		}
	}
}

// TestScriptQueueMasks: each planned queue's rps_cpus and xps_cpus name
// the queue's core after the run (read back in whatever form the kernel
// prints), and --undo writes back the values found, driver-set XPS masks
// included. --dry-run prints the writes.
func TestScriptQueueMasks(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	r, script := planScript(t, "82599", "web_and_dns.lpg", rules)
	steps := linux.Steps(r)
	for _, q := range r.Plan.Queues {
		for _, kind := range []string{linux.StepRPS, linux.StepXPS} {
			if !slices.ContainsFunc(steps, func(s linux.Step) bool { return s.Kind == kind && s.Queue == q.ID && s.Core == q.Core }) {
				t.Errorf("no %s step for queue %d on core %d", kind, q.ID, q.Core)
			}
		}
	}
	// The plan's queue count from the start, so that the masks found
	// are the driver's (ethtool -L would make new, empty ones).
	f := newFake(t, "ixgbe", planQueues(r))
	before := f.Snapshot(t)
	out, code := f.Run(t, script, nil, "--dry-run", "eth0")
	queues := filepath.Join(f.Sys, "class", "net", "eth0", "queues")
	if code != 0 || !strings.Contains(out, "echo 2 > "+queues+"/rx-1/rps_cpus\n") || !strings.Contains(out, "echo 2 > "+queues+"/tx-1/xps_cpus\n") {
		t.Errorf("--dry-run: exit %d, no mask writes:\n%s", code, out)
	}
	if f.Snapshot(t) != before {
		t.Fatal("--dry-run changed something")
	}
	out, code = f.Run(t, script, nil, "eth0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	f.CheckMasks(t, r)
	if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
	if got, want := f.Mask(t, "tx", 1), f.KernelMask(1); got != want {
		t.Errorf("tx-1's XPS mask after --undo is %q, want the driver's %q", got, want)
	}
}

// TestScriptQueueMasksSkipped: a kernel built without CONFIG_RPS has no
// rps_cpus, and a device with one transmit queue refuses to read
// xps_cpus (net-sysfs.c, xps_cpus_show: ENOENT). Those steps are skipped,
// not failed: the run applies the rest and says so, with --keep-going as
// "skipped N: why" lines.
func TestScriptQueueMasksSkipped(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	r, script := planScript(t, "82599", "web_and_dns.lpg", rules)
	steps := linux.Steps(r)
	nq := planQueues(r)
	f := newFake(t, "ixgbe", nq)
	for q := 0; q < nq; q++ {
		dir := filepath.Join(f.Sys, "class", "net", "eth0", "queues")
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("rx-%d", q), "rps_cpus")); err != nil {
			t.Fatal(err)
		}
		// A file that cannot be read, as xps_cpus of a one-queue device.
		xps := filepath.Join(dir, fmt.Sprintf("tx-%d", q), "xps_cpus")
		if err := os.Remove(xps); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(xps, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := f.Snapshot(t)
	out, code := f.Run(t, script, nil, "--keep-going", "eth0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if refused := regexp.MustCompile(`(?m)^refused `).FindAllString(out, -1); len(refused) > 0 {
		t.Errorf("%d refused steps:\n%s", len(refused), out)
	}
	skipped := regexp.MustCompile(`(?m)^skipped (\d+): (.*)$`).FindAllStringSubmatch(out, -1)
	if len(skipped) != 2*len(r.Plan.Queues) {
		t.Fatalf("%d skipped steps, want %d:\n%s", len(skipped), 2*len(r.Plan.Queues), out)
	}
	for _, m := range skipped {
		n, _ := strconv.Atoi(m[1])
		if n < 1 || n > len(steps) {
			t.Fatalf("skipped step %d of %d", n, len(steps))
		}
		switch s := steps[n-1]; {
		case s.Kind == linux.StepRPS && m[2] == "the kernel has no rps_cpus (it was built without CONFIG_RPS)":
		case s.Kind == linux.StepXPS && strings.HasPrefix(m[2], "xps_cpus of tx-") && strings.Contains(m[2], "cannot be read"):
		default:
			t.Errorf("skipped step %d (%s): %s", n, s.Kind, m[2])
		}
	}
	if !strings.Contains(out, fmt.Sprintf("applied %d of %d steps to eth0 (%d skipped", len(steps)-len(skipped), len(steps), len(skipped))) {
		t.Errorf("the summary does not count the skipped steps:\n%s", out)
	}
	if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestScriptQueueMaskNotTaken: a mask that does not read back as written
// (the kernel keeps only online CPUs in an RPS map, store_rps_map) fails
// its step, and the run undoes what it applied.
func TestScriptQueueMaskNotTaken(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	r, script := planScript(t, "82599", "web_and_dns.lpg", rules)
	f := newFake(t, "ixgbe", planQueues(r))
	rps := filepath.Join(f.Sys, "class", "net", "eth0", "queues", "rx-1", "rps_cpus")
	if err := os.Remove(rps); err != nil {
		t.Fatal(err)
	}
	// Takes every write, reads back empty.
	if err := os.Symlink(os.DevNull, rps); err != nil {
		t.Fatal(err)
	}
	before := f.Snapshot(t)
	out, code := f.Run(t, script, nil, "eth0")
	if code != 1 || !regexp.MustCompile(`step \d+/\d+: receive packet steering of queue 1 on core 1 \(rx-1/rps_cpus\) failed: rx-1/rps_cpus reads  afterwards, not core 1's mask 2`).MatchString(out) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("the failed run left changes behind:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestScriptQueueMasksOtherNamespace: a /sys without the interface (one
// mounted in another network namespace) refuses the mask steps and says
// why, under --keep-going.
func TestScriptQueueMasksOtherNamespace(t *testing.T) {
	t.Parallel() // each test its own fake NIC, in its own directories
	r, script := planScript(t, "82599", "web_and_dns.lpg", rules)
	f := newFake(t, "ixgbe", planQueues(r))
	net := filepath.Join(f.Sys, "class", "net")
	if err := os.Rename(filepath.Join(net, "eth0"), filepath.Join(net, "eth9")); err != nil {
		t.Fatal(err)
	}
	out, code := f.Run(t, script, nil, "--keep-going", "eth0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	refused := regexp.MustCompile(`(?m)^refused \d+: .*/class/net/eth0 does not exist: this sysfs belongs to another network namespace`).FindAllString(out, -1)
	if len(refused) != 2*len(r.Plan.Queues) {
		t.Errorf("%d mask steps refused for the namespace, want %d:\n%s", len(refused), 2*len(r.Plan.Queues), out)
	}
}

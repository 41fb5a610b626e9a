package discover_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/discover"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

// recorded answers ethtool from files in testdata/DRIVER.
func recorded(dir string) discover.Runner {
	return func(args ...string) (string, error) {
		name := map[string]string{"-i": "i", "-k": "k", "-l": "l", "-x": "x"}[args[0]]
		if args[0] == "-n" && len(args) == 4 {
			name = args[3]
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".txt"))
		if err != nil {
			return "", errors.New("Operation not supported")
		}
		return string(b), nil
	}
}

// model discovers a model from recorded outputs, as the command does.
func model(t *testing.T, f *discover.Facts) (string, *prg.Model) {
	t.Helper()
	d, known := nics.Driver(f.Driver)
	var tables []discover.Table
	if known {
		tables = discover.TablesOf(d)
	}
	text := discover.PRG(f, known, tables)
	m, diags := prg.Load("discovered.prg", []byte(text))
	if diags.HasErrors() {
		t.Fatalf("the discovered model does not load: %v\n%s", diags.Error(), text)
	}
	return text, m
}

// embedOn embeds an example on the model for Linux.
func embedOn(t *testing.T, m *prg.Model, example string) *embed.Result {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	st, diags := lpg.LoadStack(example, src)
	if st == nil {
		t.Fatal(diags)
	}
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	d, why := nics.DriverFor(m)
	if d == nil {
		t.Fatalf("no driver facts: %s", why)
	}
	r, err := embed.Run(&embed.Input{NIC: "discovered", Model: m, Stack: st, LPG: g, Cost: costmodel.Balance{}, Strategy: "default", Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecorded(t *testing.T) {
	for _, c := range []struct {
		driver          string
		queues, indir   int
		udpPorts, table bool
	}{
		{"ixgbe", 63, 128, false, true},
		{"igb", 8, 128, false, false},
		{"virtio_net", 4, 0, false, false},
	} {
		t.Run(c.driver, func(t *testing.T) {
			f, err := discover.Probe("eth0", recorded(filepath.Join("testdata", c.driver)), 0)
			if err != nil {
				t.Fatal(err)
			}
			if f.Driver != c.driver || f.MaxCombined != c.queues || f.IndirSize != c.indir || f.UDPPorts != c.udpPorts {
				t.Errorf("facts %+v", f)
			}
			text, m := model(t, f)
			golden.Check(t, filepath.Join("testdata", c.driver+".prg.golden"), []byte(text))
			if len(m.Queues) != c.queues {
				t.Errorf("%d queues, want %d", len(m.Queues), c.queues)
			}
			if got := m.Space("RxCFDir") != nil; got != c.table {
				t.Errorf("flow director table: %v, want %v", got, c.table)
			}
			r := embedOn(t, m, "dns_ntp.lpg")
			if r.Plan.Target != "linux" || r.Plan.Driver != c.driver {
				t.Errorf("plan target %q driver %q", r.Plan.Target, r.Plan.Driver)
			}
		})
	}
}

// TestVeth discovers a veth made in a network namespace of the test's own.
func TestVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	for _, tool := range []string{"ethtool", "unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	script := `set -e
ip link add v0 type veth peer name v1
for a in "-i" "-k" "-l" "-x" "-n rx-flow-hash udp4" "-n rx-flow-hash tcp4"; do
    echo "=== $a"
    # shellcheck disable=SC2086
    ethtool $a v0 2>&1 | sed 's/^/| /' || true
done
`
	out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Skipf("cannot make a veth in a namespace here: %v\n%s", err, out)
	}
	answers := map[string]string{}
	key := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "=== "):
			key = strings.TrimPrefix(line, "=== ")
		case strings.HasPrefix(line, "| "):
			answers[key] += strings.TrimPrefix(line, "| ") + "\n"
		}
	}
	run := func(args ...string) (string, error) {
		a := strings.Join(args[:len(args)-1], " ")
		if args[0] == "-n" {
			a = "-n " + strings.Join(args[2:], " ")
		}
		s := answers[a]
		if strings.Contains(s, "Operation not supported") && !strings.Contains(s, "RX flow hash indirection") || strings.HasPrefix(s, "Cannot") {
			return "", errors.New(strings.TrimSpace(s))
		}
		return s, nil
	}
	f, err := discover.Probe("v0", run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Driver != "veth" {
		t.Fatalf("driver %q", f.Driver)
	}
	_, m := model(t, f)
	r := embedOn(t, m, "web_and_dns.lpg")
	if len(r.Plan.Queues) == 0 {
		t.Error("no queue in the plan")
	}
	t.Logf("veth: %d queues max, indirection %d, notes %v", f.MaxCombined, f.IndirSize, f.Notes)
}

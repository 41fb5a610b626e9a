// Package linuxtest is a fake network interface for tests of linux.sh
// and the scripts like it: a stand-in for ethtool (fake-ethtool, which
// keeps an interface's state in files) with a fake /proc and /sys.
package linuxtest

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/embed"
)

//go:embed fake-ethtool
var fakeEthtool []byte

// NIC is a fake interface eth0: the fake ethtool's state (Dir), the
// directory with the fake ethtool as ethtool (Bin), a fake /proc with one
// interrupt per queue (Proc), a fake /sys (Sys), and the path of the
// scripts' undo record (State).
type NIC struct {
	Dir, Bin, Proc, Sys, State string
}

// New sets up a fake interface eth0 driven by driver with channels
// combined channels, in directories of the test.
func New(t testing.TB, driver string, channels int) *NIC {
	t.Helper()
	base := t.TempDir()
	f := &NIC{Dir: filepath.Join(base, "nic"), Bin: filepath.Join(base, "bin"), Proc: filepath.Join(base, "proc"), Sys: filepath.Join(base, "sys"), State: filepath.Join(base, "run.undo")}
	for _, d := range []string{f.Dir, f.Bin, f.Proc, f.Sys} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.Bin, "ethtool"), fakeEthtool, 0o755); err != nil {
		t.Fatal(err)
	}
	var indir []string
	for i := 0; i < 128; i++ {
		indir = append(indir, fmt.Sprint(i%channels))
	}
	indir = append(indir, "") // the fake writes a trailing space
	files := map[string]string{
		"driver": driver, "max": "63", "channels": fmt.Sprint(channels), "rx-checksumming": "off",
		"tx-checksumming": "off", "ntuple-filters": "off", "udp4": "sd", "inserted": "0",
		"indir": strings.Join(indir, " "), "log": "",
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(f.Dir, k), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel's view: one rx-N and one tx-N directory per queue in use
	// with their CPU masks as a 64-CPU machine prints them (a comma every
	// 32 bits; the driver put transmit queue N on CPU N, as ixgbe's
	// ixgbe_alloc_q_vector does with netif_set_xps_queue), the module
	// parameters, the PCI device's IRQ.
	for q := 0; q < channels; q++ {
		for dir, mask := range map[string]string{"rx": "rps_cpus=00000000,00000000", "tx": fmt.Sprintf("xps_cpus=%s", f.KernelMask(q))} {
			d := filepath.Join(f.Sys, "class", "net", "eth0", "queues", fmt.Sprintf("%s-%d", dir, q))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			file, value, _ := strings.Cut(mask, "=")
			if err := os.WriteFile(filepath.Join(d, file), []byte(value+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(f.Sys, "class", "net", "eth0", "device"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Sys, "class", "net", "eth0", "device", "irq"), []byte("100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if driver == "myri10ge" {
		params := filepath.Join(f.Sys, "module", "myri10ge", "parameters")
		if err := os.MkdirAll(params, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"myri10ge_max_slices": fmt.Sprint(channels), "myri10ge_rss_hash": "5"} {
			if err := os.WriteFile(filepath.Join(params, k), []byte(v+"\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The interrupts as the driver names them (see nics/drivers.go): a
	// device with one interrupt shares its line with a USB controller.
	name := func(q int) string {
		switch {
		case driver == "acenic":
			return "acenic, ehci_hcd:usb1"
		case driver == "myri10ge" && channels == 1:
			return "eth0"
		case driver == "myri10ge":
			return fmt.Sprintf("eth0:slice-%d", q)
		}
		return fmt.Sprintf("eth0-TxRx-%d", q)
	}
	var irqs strings.Builder
	irqs.WriteString("           CPU0       CPU1\n")
	for q := 0; q < 64; q++ {
		irq := 100 + q
		if (driver == "acenic" || driver == "myri10ge") && q >= channels {
			break
		}
		fmt.Fprintf(&irqs, " %d:          0          0  IR-PCI-MSI 524288-edge      %s\n", irq, name(q))
		d := filepath.Join(f.Proc, "irq", fmt.Sprint(irq))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte("0-7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.Proc, "interrupts"), []byte(irqs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// KernelMask is core's mask as a 64-CPU kernel prints it (bitmap's
// "%*pb": zero-padded, a comma every 32 bits).
func (f *NIC) KernelMask(core int) string {
	m := uint64(1) << core
	return fmt.Sprintf("%08x,%08x", m>>32, m&0xffffffff)
}

// Mask reads the CPU mask of queue dir-q (dir rx: rps_cpus, tx: xps_cpus).
func (f *NIC) Mask(t testing.TB, dir string, q int) string {
	t.Helper()
	file := map[string]string{"rx": "rps_cpus", "tx": "xps_cpus"}[dir]
	b, err := os.ReadFile(filepath.Join(f.Sys, "class", "net", "eth0", "queues", fmt.Sprintf("%s-%d", dir, q), file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// CheckMasks checks that each queue of the plan has its core alone in
// its RPS and XPS masks.
func (f *NIC) CheckMasks(t testing.TB, r *embed.Result) {
	t.Helper()
	for _, q := range r.Plan.Queues {
		for _, dir := range []string{"rx", "tx"} {
			if got, want := f.Mask(t, dir, q.ID), linux.CPUMask(q.Core); got != want {
				t.Errorf("%s-%d: mask %q, want core %d's %q", dir, q.ID, got, q.Core, want)
			}
		}
	}
}

// Read is a file of the fake ethtool's state, trimmed.
func (f *NIC) Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Snapshot is the fake interface's whole state, for before/after checks.
func (f *NIC) Snapshot(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, k := range []string{"channels", "rx-checksumming", "tx-checksumming", "ntuple-filters", "udp4", "indir"} {
		fmt.Fprintf(&b, "%s=%s\n", k, f.Read(t, k))
	}
	rules, _ := filepath.Glob(filepath.Join(f.Dir, "rule.*"))
	fmt.Fprintf(&b, "rules=%d\n", len(rules))
	for q := 0; q < 64; q++ {
		a, _ := os.ReadFile(filepath.Join(f.Proc, "irq", fmt.Sprint(100+q), "smp_affinity_list"))
		fmt.Fprintf(&b, "irq%d=%s", q, a)
		for _, dir := range []string{"rx", "tx"} {
			masks, _ := filepath.Glob(filepath.Join(f.Sys, "class", "net", "eth0", "queues", fmt.Sprintf("%s-%d", dir, q), "*_cpus"))
			for _, m := range masks {
				v, _ := os.ReadFile(m)
				fmt.Fprintf(&b, "%s-%d/%s=%s", dir, q, filepath.Base(m), v)
			}
		}
	}
	return b.String()
}

// Env is the environment a script runs on the fake in: the fake
// ethtool first in PATH, its state, the fake /proc and /sys, the record.
func (f *NIC) Env() []string {
	return []string{"PATH=" + f.Bin + ":" + os.Getenv("PATH"), "FAKE_ETHTOOL_DIR=" + f.Dir, "FAKE_SYS=" + f.Sys, "DRAGONC_PROC=" + f.Proc, "DRAGONC_SYS=" + f.Sys, "DRAGONC_STATE=" + f.State}
}

// Run runs script with args on the fake (env added to Env), and returns
// its output and exit code.
func (f *NIC) Run(t testing.TB, script string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), f.Env()...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

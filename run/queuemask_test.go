package run

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/backends/linux"
)

// queueMasks reads the RPS and XPS masks of vA's two queues in namespace
// ns, through `ip netns exec`, which mounts a /sys of the namespace's own.
func queueMasks(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for q := range 2 {
		for _, f := range []string{fmt.Sprintf("rx-%d/rps_cpus", q), fmt.Sprintf("tx-%d/xps_cpus", q)} {
			b, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/vA/queues/"+f).CombinedOutput()
			if err != nil {
				t.Fatalf("reading %s in %s: %v\n%s", f, ns, err, b)
			}
			out[f] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// withOwnSys runs f on the calling thread (locked, inside a network
// namespace) with a /sys of that namespace mounted in a mount namespace
// of the thread's own, as `ip netns exec` does: sysfs shows the network
// devices of the namespace that mounted it, and linux.sh, which dragonc
// run starts from this thread, reads and writes the queues of vA there.
// The mount namespace ends with the thread.
func withOwnSys(f func() error) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// Nothing mounted here may reach the host's mounts.
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making / a slave mount: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		return fmt.Errorf("mounting the namespace's sysfs: %w", err)
	}
	return f()
}

// TestServeHardwareQueueMasks serves the 82599 plan on a veth with two
// receive and two transmit queues: the veth refuses the plan's ethtool
// steps, but the kernel takes linux.sh's RPS and XPS masks, so while the
// stack serves, each planned queue the veth has (and whose core this
// machine has) lists its planned core alone in rx-N/rps_cpus and
// tx-N/xps_cpus, and after the run every mask is what it was before.
func TestServeHardwareQueueMasks(t *testing.T) {
	a, _ := pair(t)
	// Masks of the test's own before the run, so that restoring them is
	// not restoring the veth's zeros.
	for f, v := range map[string]string{"rx-0/rps_cpus": "3", "tx-1/xps_cpus": "1"} {
		if out, err := exec.Command("ip", "netns", "exec", a, "sh", "-c", "echo "+v+" >/sys/class/net/vA/queues/"+f).CombinedOutput(); err != nil {
			t.Fatalf("setting %s: %v\n%s", f, err, out)
		}
	}
	before := queueMasks(t, a)
	if before["rx-0/rps_cpus"] != "3" || before["tx-1/xps_cpus"] != "1" {
		t.Fatalf("the masks set before the run read back as %v", before)
	}
	r, st := embedHardware(t, "82599", hwStack)
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
	}
	var cut []string // planned queues or cores the veth or the machine lacks
	for _, q := range r.Plan.Queues {
		if q.ID >= 2 || q.Core >= runtime.NumCPU() {
			cut = append(cut, fmt.Sprintf("queue %d on core %d", q.ID, q.Core))
			continue
		}
		want[fmt.Sprintf("rx-%d/rps_cpus", q.ID)] = linux.CPUMask(q.Core)
		want[fmt.Sprintf("tx-%d/xps_cpus", q.ID)] = linux.CPUMask(q.Core)
	}
	if len(want) == 0 || len(cut) == len(r.Plan.Queues) {
		t.Fatalf("the plan has no queue the veth has: %+v", r.Plan.Queues)
	}

	var out, log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- inNS(a, func() error {
			return withOwnSys(func() error {
				return Serve(ctx, r, st, Options{Iface: "vA", Socket: "packet", Stdout: &out, Stderr: &log, Force: true, Ready: func() { close(ready) }})
			})
		})
	}()
	waitReady(t, ready, served, &log)
	during := queueMasks(t, a)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v\n%s", err, log.String())
	}
	after := queueMasks(t, a)
	for f, w := range want {
		// The kernel prints a mask zero-padded to its CPU count.
		if got := strings.TrimLeft(during[f], "0"); got != strings.TrimLeft(w, "0") {
			t.Errorf("while serving, %s is %q, want %q", f, during[f], w)
		}
		if after[f] != before[f] {
			t.Errorf("after the run, %s is %q, want %q as before", f, after[f], before[f])
		}
	}
	// Masks the veth or the machine cannot take are counted as refused.
	if len(cut) > 0 && !strings.Contains(log.String(), fmt.Sprintf("refused: %d RPS/XPS mask(s), the first: ", 2*len(cut))) {
		t.Errorf("the report does not say the masks of %s were refused:\n%s", strings.Join(cut, ", "), log.String())
	}
	t.Logf("plan queues %+v; masks before %v, while serving %v", r.Plan.Queues, before, during)
}

// TestHardwareReportMasks: refused RPS/XPS masks are counted in one line
// with the first reason, and the steps this kernel has nothing for in
// another, apart from the refused rules.
func TestHardwareReportMasks(t *testing.T) {
	h := &hardware{iface: "eth0", steps: 10, applied: 5,
		refused: []linux.Step{
			{Kind: linux.StepRPS, Desc: "receive packet steering of queue 2 on core 2 (rx-2/rps_cpus)", Queue: 2},
			{Kind: linux.StepRule, Desc: "filter rule 0"},
			{Kind: linux.StepXPS, Desc: "transmit packet steering of queue 2 on core 2 (tx-2/xps_cpus)", Queue: 2},
		},
		reasons: []string{"eth0 has no queue rx-2", "rule 0 is not in the NIC's table", "eth0 has no queue tx-2"},
		skipped: []string{"transmit packet steering of queue 0 on core 0 (tx-0/xps_cpus): xps_cpus of tx-0 cannot be read"},
	}
	want := []string{
		"the driver of eth0 took 5 of the plan's 10 linux.sh steps",
		"refused: 1 filter rule(s), the first: rule 0 is not in the NIC's table",
		"refused: 2 RPS/XPS mask(s), the first: receive packet steering of queue 2 on core 2 (rx-2/rps_cpus): eth0 has no queue rx-2 (the kernel's own processing of those queues, for programs on kernel sockets, stays where their interrupts are)",
		"skipped: 1 step(s) this kernel has nothing for, the first: transmit packet steering of queue 0 on core 0 (tx-0/xps_cpus): xps_cpus of tx-0 cannot be read",
	}
	if got := h.report(); !slices.Equal(got, want) {
		t.Errorf("report:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

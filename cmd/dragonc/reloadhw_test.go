package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dragonc/dragonc/internal/netnstest"
	drun "github.com/dragonc/dragonc/run"
)

// hwReloadStack is served on the 82599 by TestReloadHardwareCommand: under
// the priority cost, e2's port is a Flow Director rule.
const hwReloadStack = `stack hwreloaded {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint e1 udp listen 10.9.0.1:7001 { app "echo" class gold rate 1Mpps cores 1 }
    endpoint e2 udp listen *:7002 { app "echo" rate 10kpps }
    service arp
    service icmp-echo
}
`

// TestReloadHardwareCommand: dragonc run 82599 on a veth (whose driver
// refuses every step of linux.sh, so the eBPF stage steers everything),
// then dragonc reload: an added endpoint's Flow Director rule is offered
// to the driver, refused, and steered by the stage, and its first
// datagram is answered; a removed one is port unreachable; dragonc stop
// restores the veth's settings and leaves no state behind.
func TestReloadHardwareCommand(t *testing.T) {
	a, b := vethPair(t)
	stack := detachEnv(t, a, "hwreload.lpg", hwReloadStack)
	in := func(args ...string) (int, string, string) {
		var code int
		var out, errs string
		netnstest.In(a, func() error { code, out, errs = dragoncIn(t, args...); return nil })
		return code, out, errs
	}
	settings := func() string { return netnstest.Ethtool(a, "vA") }
	before := settings()
	if code, _, errs := in("run", "--detach", "--socket", "xdp", "--force", "--cost", "priority", "82599", stack, "vA"); code != 0 {
		t.Fatalf("run --detach: exit %d:\n%s", code, errs)
	}
	peer := func(f func() error) {
		t.Helper()
		if err := netnstest.In(b, f); err != nil {
			t.Fatal(err)
		}
	}
	reload := func(src string) drun.ReloadResult {
		t.Helper()
		os.WriteFile(stack, []byte(src), 0o644)
		code, out, errs := in("reload", "--json", "vA")
		var res drun.ReloadResult
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.Applied || res.Restarted != "" {
			t.Fatalf("reload --json: exit %d, %+v (%v):\n%s%s", code, res, err, out, errs)
		}
		return res
	}

	res := reload(strings.Replace(hwReloadStack, "    service arp", "    endpoint e4 udp listen *:7004 { app \"echo\" rate 10kpps }\n    service arp", 1))
	if len(res.Added) != 1 || res.Added[0] != "e4" || res.NIC == nil || res.NIC.Refused != 1 || res.RulesAdded != 1 || !strings.HasSuffix(res.NIC.Script, "/hardware/reload-1.sh") {
		t.Fatalf("adding e4: %+v, NIC %+v", res, res.NIC)
	}
	script := res.NIC.Script
	if _, err := os.Stat(script); err != nil {
		t.Errorf("the reload's rule script: %v", err)
	}
	peer(func() error {
		if got, err := udpAnswer(7004, "first"); err != nil || got != "first" {
			return fmt.Errorf("the added endpoint: %q, %v", got, err)
		}
		return nil
	})
	res = reload(hwReloadStack)
	// e4's rule was the stage's alone: nothing to delete from the NIC.
	if len(res.Removed) != 1 || res.Removed[0] != "e4" || res.RulesRemoved != 1 || res.NIC == nil || res.NIC.Deleted != 0 || res.NIC.Script != "" {
		t.Fatalf("removing e4: %+v", res)
	}
	peer(func() error {
		if _, err := udpAnswer(7004, "gone"); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("port 7004 after its removal: %v, want port unreachable", err)
		}
		if got, err := udpAnswer(7002, "kept"); err != nil || got != "kept" {
			return fmt.Errorf("e2 after the reloads: %q, %v", got, err)
		}
		return nil
	})
	if code, _, errs := in("stop", "vA"); code != 0 {
		t.Fatalf("stop: exit %d:\n%s", code, errs)
	}
	if after := settings(); after != before {
		t.Errorf("vA's settings after stop:\nbefore\n%s\nafter\n%s", before, after)
	}
	if es := statusOf(t, a); len(es) != 0 {
		t.Errorf("status after stop: %+v", es)
	}
	dir := filepath.Dir(filepath.Dir(script))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		left, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
		t.Errorf("stop left the run's state directory %s (%v): %v", dir, err, left)
	}
}

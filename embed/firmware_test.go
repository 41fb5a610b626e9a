package embed

import (
	"strings"
	"testing"
)

// TestFirmwareDemux: when the Tigon's firmware steers endpoints into host
// rings, its demultiplexing task is placed on a core with the handlers,
// and its load follows the declared rate.
func TestFirmwareDemux(t *testing.T) {
	src := `stack fw {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    cores 0..3
    endpoint a udp listen *:1000 { rate 20kpps core 1 }
    endpoint b udp listen *:1001 { rate 20kpps core 2 }
}`
	r, err := Run(stackInput(t, "tigon", src, "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	pp, ok := r.Plan.Placement["FirmwareDemux"]
	if !ok || pp.Where != "engine" || (pp.Engine != "CpuA" && pp.Engine != "CpuB") {
		t.Fatalf("FirmwareDemux placement %+v", pp)
	}
	if r.Plan.Placement["RxL4UDPDemux"].Where == "software" && len(r.Plan.Placement["RxL4UDPDemux"].Queues) == len(r.Plan.Queues) {
		t.Errorf("the firmware steers each endpoint to its ring, so software demultiplexing should not run on every queue: %+v", r.Plan.Placement["RxL4UDPDemux"])
	}
	// 40 kpps x 150 cycles / 88 MHz = 6.8 % of a core.
	var total float64
	for _, e := range r.Plan.Engines {
		total += e.Percent
	}
	if total < 100+6 || total > 100+8 {
		t.Errorf("engine loads add up to %.1f%%, want 100%% of the handlers plus about 6.8%%", total)
	}
}

// TestFirmwareOverload: firmware steering that the cores cannot carry at
// the declared rates is left to the host, with a warning.
func TestFirmwareOverload(t *testing.T) {
	src := `stack hot {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    cores 0..3
    endpoint a udp listen *:1000 { rate 500kpps core 1 }
    endpoint b udp listen *:1001 { rate 20kpps core 2 }
}`
	r, err := Run(stackInput(t, "tigon", src, "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Plan.Placement["FirmwareDemux"]; ok {
		t.Errorf("firmware demultiplexing placed at 520 kpps: %+v", r.Plan.Engines)
	}
	for _, e := range r.Plan.Engines {
		if e.Percent > 100 {
			t.Errorf("engine %s at %.0f%%", e.Name, e.Percent)
		}
	}
	found := false
	for _, w := range r.Plan.Warnings {
		if strings.Contains(w, "the host does it") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warning: %v", r.Plan.Warnings)
	}
}

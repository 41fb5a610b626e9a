package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shadowStack has a diagnostic warning (d is shadowed) and plan warnings
// (applications on cores their packets are not all served on).
const shadowStack = `stack shadow {
    interface eth0 { mac 00:1b:21:00:00:01 ip 192.0.2.10/24 }
    cores 0..3
    endpoint c tcp listen 192.0.2.10:80 { core 3 }
    endpoint d tcp listen *:80
    endpoint dns udp listen *:53 { cores 0..1 }
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
		if len(warnings) < 2 || !strings.Contains(errs, `endpoint "d" can never receive a packet`) || !strings.Contains(errs, "endpoint c runs on cores 3") {
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

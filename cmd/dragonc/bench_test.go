package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/stackgen"
)

// BenchmarkCLI times the compiler as a user meets it: `dragonc check` and
// `dragonc embed --json` run in-process on realistic mixed stacks
// (stackgen: listeners on two interfaces and wildcard addresses, UDP and
// TCP flows, a gold class and rates) of 1,000 to 100,000 endpoints, with
// the listeners declared first and with the flows first (the order that
// fills the 82599's Flow Director with flows). Everything the command does
// is in the figure: reading the file, parsing, lowering, deriving the LPG,
// the search, the embedding and writing the plan.
//
//	go test ./cmd/dragonc -run XXX -bench CLI -benchmem
//	go test ./cmd/dragonc -run XXX -bench 'CLI/.*/10000/' -benchmem
func BenchmarkCLI(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []int{1000, 10000, 100000} {
		for _, order := range []string{"listeners-first", "flows-first"} {
			path := filepath.Join(dir, fmt.Sprintf("mixed%d-%s.lpg", n, order))
			if err := os.WriteFile(path, stackgen.Mixed(n, order == "flows-first"), 0o644); err != nil {
				b.Fatal(err)
			}
			for _, cmd := range [][]string{{"check", path}, {"embed", "--json", "82599", path}} {
				b.Run(fmt.Sprintf("%s/%d/%s", cmd[0], n, order), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						var errs strings.Builder
						if code := run(cmd, strings.NewReader(""), io.Discard, &errs); code != 0 {
							b.Fatalf("dragonc %s: exit %d\n%s", strings.Join(cmd, " "), code, errs.String())
						}
					}
				})
			}
		}
	}
}

// TestBenchLiveFlags: bench --live's flags are checked before anything
// runs: it takes no NIC or stack, refuses the offline benchmark's flags
// and bad values with a usage error, and its own flags need --live.
func TestBenchLiveFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--live", "82599", "examples/udp_1000.lpg"}, "--live takes no NIC or stack"},
		{[]string{"bench", "--live", "--cost", "priority"}, "--cost has no meaning with --live"},
		{[]string{"bench", "--live", "--frames", "10"}, "--frames has no meaning with --live"},
		{[]string{"bench", "--live", "--rounds", "0"}, "rounds 0 is not in 1..100"},
		{[]string{"bench", "--live", "--duration", "1ms"}, "duration 1ms"},
		{[]string{"bench", "--live", "--in-flight", "0"}, "in-flight 0"},
		{[]string{"bench", "--live", "--servers", "c,nginx"}, `no server "nginx"`},
		{[]string{"bench", "--rounds", "2", "82599", "examples/udp_1000.lpg"}, "--rounds goes with --live"},
		{[]string{"bench", "--transactions", "2", "82599", "examples/udp_1000.lpg"}, "--transactions goes with --live"},
		{[]string{"bench", "--busy-poll", "82599", "examples/udp_1000.lpg"}, "--busy-poll goes with --live"},
		{[]string{"bench", "--live", "--spin", "-1s"}, "--spin -1s is negative"},
		{[]string{"bench", "--live", "--xdp-mode", "native"}, `XDP mode "native": want auto, driver, generic`},
		{[]string{"bench", "--xdp-mode", "driver", "82599", "examples/udp_1000.lpg"}, "--xdp-mode goes with --live"},
		{[]string{"bench", "--live", "--busy-poll", "--spin", "1ms"}, "--busy-poll and --spin"},
		{[]string{"bench", "--live", "--memcached", "--ping"}, "choose one"},
		{[]string{"bench", "--live", "--gold-rate", "100"}, "--gold-rate goes with --memcached"},
		{[]string{"bench", "--live", "--memcached", "--gold-rate", "0"}, "gold rate 0"},
		{[]string{"bench", "--live", "--memcached", "--transactions", "5"}, "--transactions has no meaning with --memcached"},
		{[]string{"bench", "--live", "--memcached", "--servers", "c"}, `no server "c"`},
		{[]string{"bench", "--memcached", "82599", "examples/udp_1000.lpg"}, "--memcached goes with --live"},
	} {
		code, out, errs := dragonc(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("dragonc %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
}

// TestBenchLive runs bench --live briefly through the command, on the two
// servers that need no build (the Go kernel server and the reflector):
// one JSON document on standard output with both rows measured, progress
// on standard error. Without root it must say that root is needed.
func TestBenchLive(t *testing.T) {
	args := []string{"bench", "--live", "--json", "--rounds", "1", "--transactions", "200", "--servers", "go,reflector"}
	if os.Geteuid() != 0 {
		code, out, errs := dragonc(t, args...)
		if code != exitInput || out != "" || !strings.Contains(errs, "needs root") {
			t.Errorf("bench --live without root: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		return
	}
	code, out, errs := dragonc(t, args...)
	if code != exitOK {
		t.Fatalf("bench --live: exit %d\n%s", code, errs)
	}
	var rep struct {
		Generator string `json:"generator"`
		Servers   []struct {
			Name   string `json:"name"`
			Rounds []struct {
				Many  *struct{ Answered int } `json:"many"`
				One   *struct{ Answered int } `json:"one"`
				Error string                  `json:"error"`
			} `json:"rounds"`
		} `json:"servers"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&rep); err != nil || dec.More() {
		t.Fatalf("bench --live --json is not one JSON document: %v\n%s", err, out)
	}
	if len(rep.Servers) != 2 || rep.Servers[0].Name != "go" || rep.Servers[1].Name != "reflector" {
		t.Fatalf("servers: %+v", rep.Servers)
	}
	for _, s := range rep.Servers {
		if len(s.Rounds) != 1 || s.Rounds[0].Error != "" || s.Rounds[0].Many == nil || s.Rounds[0].Many.Answered == 0 || s.Rounds[0].One == nil || s.Rounds[0].One.Answered == 0 {
			t.Errorf("%s: %+v", s.Name, s.Rounds)
		}
	}
	if !strings.Contains(errs, "bench --live: round 1 of 1") || !strings.Contains(errs, "removed the namespaces") {
		t.Errorf("no progress on standard error:\n%s", errs)
	}
}

// TestBenchLiveSignal: SIGTERM half-way through bench --live ends it with
// exit 1 and a message, and its namespaces are gone.
func TestBenchLiveSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bench --live needs root")
	}
	cmd := exec.Command(os.Args[0], "bench", "--live", "--rounds", "3", "--duration", "2s", "--servers", "go,reflector")
	cmd.Env = append(os.Environ(), "DRAGONC_TEST_AS_DRAGONC=1")
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A benchmark that does not stop is killed rather than waited for.
	defer time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }).Stop()
	prefix := fmt.Sprintf("dragonc-bench-%d-", cmd.Process.Pid)
	var log strings.Builder
	sc := bufio.NewScanner(errs)
	signalled := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !signalled && strings.Contains(sc.Text(), "in flight, 1s") {
			cmd.Process.Signal(syscall.SIGTERM)
			signalled = true
		}
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInput || !signalled {
		t.Fatalf("bench --live after SIGTERM: %v, signalled %v\n%s", err, signalled, log.String())
	}
	if !strings.Contains(log.String(), "stopped by a signal") || !strings.Contains(log.String(), "removed the namespaces") {
		t.Errorf("no word of the signal or the clean-up:\n%s", log.String())
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("namespace %s left", e.Name())
		}
	}
}

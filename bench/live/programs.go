package live

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The C programs, built with cc at bench time.
var (
	//go:embed csrc/gen.c
	genC string
	//go:embed csrc/server.c
	serverC string
	//go:embed csrc/mcgen.c
	mcgenC string
	//go:embed csrc/common.h
	commonH string
)

// programs are the benchmark's own programs: the load generator (C, or
// this program itself as the Go generator), the C echo server and the
// memcached load generator (both "" when there is no C compiler).
type programs struct {
	cc        string // the C compiler's path; "" when there is none
	noCC      string // why there is no C compiler
	gen       string // the C load generator; "" for the Go one
	server    string // the C echo server
	mcgen     string // the memcached load generator
	goGen     []string
	generator string // "c" or "go"
}

// buildPrograms builds the C programs in dir with cc (or $CC). Without a
// C compiler, or when it fails, the load generator is the Go one
// (self re-executed) and the C server's row is skipped, with the reason.
func buildPrograms(dir string, self []string) (*programs, error) {
	p := &programs{goGen: self, generator: "go"}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	path, err := exec.LookPath(cc)
	if err != nil {
		p.noCC = fmt.Sprintf("no C compiler (%s: %v)", cc, err)
		return p, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "common.h"), []byte(commonH), 0o600); err != nil {
		return nil, err
	}
	build := func(name, src string, extra ...string) (string, error) {
		c := filepath.Join(dir, name+".c")
		if err := os.WriteFile(c, []byte(src), 0o600); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		args := append([]string{"-O2", "-o", bin, c}, extra...)
		if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
		}
		return bin, nil
	}
	if p.gen, err = build("gen", genC); err != nil {
		p.noCC = fmt.Sprintf("the C compiler failed: %v", err)
		p.gen = ""
		return p, nil
	}
	if p.server, err = build("server", serverC, "-pthread"); err == nil {
		p.mcgen, err = build("mcgen", mcgenC, "-pthread")
	}
	if err != nil {
		p.noCC = fmt.Sprintf("the C compiler failed: %v", err)
		p.gen, p.server, p.mcgen = "", "", ""
		return p, nil
	}
	p.cc, p.generator = path, "c"
	return p, nil
}

// load is one measurement's load: how many requests are outstanding, over
// how many sockets, for how long or how many answers.
type load struct {
	inFlight, sockets int
	threads           int // the C generator's; the Go one has one
	duration          time.Duration
	count             int
	timeout, warmup   time.Duration
	icmp              bool // echo requests (ping) instead of UDP
}

// genCounts are the fields both C generators print (gen.c and mcgen.c,
// whose totals come from csrc/common.h's histogram and CPU readings).
type genCounts struct {
	Answered uint64 `json:"answered"`
	Lost     uint64 `json:"lost"`
	Late     uint64 `json:"late"`
	Stray    uint64 `json:"stray"`
	Drained  uint64 `json:"drained"`
	WindowNs uint64 `json:"window_ns"`
	P50Ns    uint64 `json:"p50_ns"`
	P99Ns    uint64 `json:"p99_ns"`
	BusyNs   uint64 `json:"busy_ns"`
	SelfNs   uint64 `json:"self_ns"`
}

// genResult is what the load generator prints (gen.c's JSON object).
type genResult struct {
	genCounts
	Refused uint64 `json:"refused"`
}

// args are the generator's arguments (gen.c's usage line).
func (l load) args(netnsPath string) []string {
	return []string{netnsPath, serverAddr.String(), "7", strconv.Itoa(l.inFlight), strconv.Itoa(l.sockets),
		ms(l.duration), strconv.Itoa(l.count), ms(l.timeout), ms(l.warmup), strconv.Itoa(max(1, l.threads)), l.proto()}
}

// ms is a generator's argument in milliseconds (at least 1).
func ms(d time.Duration) string { return strconv.FormatInt(max(1, d.Milliseconds()), 10) }

func (l load) proto() string {
	if l.icmp {
		return "icmp"
	}
	return "udp"
}

// errGenerator marks a load generator that failed.
var errGenerator = errors.New("the load generator failed")

// generate runs the load generator in namespace netnsPath and returns its
// result, as runGenerator does.
func (p *programs) generate(ctx context.Context, netnsPath string, l load, tick func(elapsed time.Duration)) (*genResult, error) {
	var cmd *exec.Cmd
	if p.gen != "" {
		cmd = exec.Command(p.gen, l.args(netnsPath)...)
	} else {
		cmd = exec.Command(p.goGen[0], append(p.goGen[1:], l.args(netnsPath)...)...)
		cmd.Env = append(os.Environ(), childEnv+"="+childGenerator)
	}
	var r genResult
	if err := runGenerator(ctx, cmd, l.warmup+l.duration+2*l.timeout, tick, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// runGenerator runs a load generator's command and reads the JSON object
// it prints into result. It stops it when ctx ends, and it waits at most
// length plus 10s, then kills the generator; tick (when not nil) is
// called about every second while it runs.
func runGenerator(ctx context.Context, cmd *exec.Cmd, length time.Duration, tick func(elapsed time.Duration), result any) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: %v", errGenerator, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := length + 10*time.Second
	start := time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%w: %v: %s", errGenerator, err, strings.TrimSpace(stderr.String()))
			}
			if err := json.Unmarshal([]byte(stdout.String()), result); err != nil {
				return fmt.Errorf("%w: its report does not read: %v: %q", errGenerator, err, stdout.String())
			}
			return nil
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			return ctx.Err()
		case <-t.C:
			if time.Since(start) > limit {
				cmd.Process.Kill()
				<-done
				return fmt.Errorf("%w: still running after %v; killed", errGenerator, limit.Round(time.Second))
			}
			if tick != nil {
				tick(time.Since(start))
			}
		}
	}
}

// startServer starts the C echo server in namespace netnsPath and returns
// once it says it is ready, with its process id; stop kills it.
func (p *programs) startServer(netnsPath string) (stop func() error, pid int, err error) {
	cmd := exec.Command(p.server, netnsPath, serverAddr.String(), "7", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A pipe of our own rather than StdoutPipe, which Wait would close
	// while the ready line is still being read.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	defer w.Close()
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, 0, err
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() error {
		cmd.Process.Kill()
		<-done
		return nil
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, out)
		out.Close()
	}()
	select {
	case line := <-ready:
		if !strings.HasPrefix(line, "ready") {
			stop()
			return nil, 0, fmt.Errorf("the C server did not start: %s", strings.TrimSpace(stderr.String()))
		}
		return stop, cmd.Process.Pid, nil
	case <-time.After(10 * time.Second):
		stop()
		return nil, 0, fmt.Errorf("the C server did not say it was ready within 10s: %s", strings.TrimSpace(stderr.String()))
	}
}

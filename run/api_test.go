package run

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/backends/gofallback"
)

// apiProgram is a Go program that serves a stack with run's Go API: the
// generated package linked in, a handler of its own for echo2 (it answers
// with the datagram reversed), built-in applications for the rest.
const apiProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dragonc/dragonc/run"

	fb "apitest/fallback"
)

func reverse(d *run.Datagram) []byte {
	out := make([]byte, len(d.Payload))
	for i, b := range d.Payload {
		out[len(out)-1-i] = b
	}
	return out
}

func main() {
	src, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r, st, err := run.Plan(os.Args[1], src)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run.Code{
		Process: func(q int, f []byte) run.Verdict {
			v := fb.Process(q, f, fb.Meta{CRCOK: true})
			return run.Verdict{Kind: uint8(v.Kind), Index: v.Index}
		},
		Endpoints: fb.EndpointNames[:], Replies: fb.Replies[:], Sinks: fb.Sinks[:],
	}
	for _, d := range fb.DropSites {
		code.DropSites = append(code.DropSites, run.DropSite(d.Node, d.Port))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opt := run.Options{Iface: os.Args[2], Socket: os.Args[3], Stdout: os.Stdout, Stderr: os.Stderr,
		Ready: func() { fmt.Fprintln(os.Stderr, "READY") }}
	if err := run.ServeCode(ctx, r, st, code, map[string]run.Handler{"echo2": reverse}, opt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

// TestServeCodeProgram builds apiProgram against this module and the
// fallback generated for the test stack, serves the stack with it in a
// namespace and checks that the program's own handler answers.
func TestServeCodeProgram(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	files := map[string][]byte{
		"go.mod":  []byte("module apitest\n\ngo 1.26\n\nrequire github.com/dragonc/dragonc v0.0.0\n\nreplace github.com/dragonc/dragonc => " + root + "\n"),
		"go.sum":  sum,
		"main.go": []byte(apiProgram),
	}
	if err := gofallback.AddTo(files, "apitest", "fallback", "served.lpg", r, st); err != nil {
		t.Fatal(err)
	}
	files["served.lpg"] = []byte(testStack)
	if err := gofallback.WriteTree(work, files); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(work, "served")
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = work
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the program: %v\n%s", err, out)
	}

	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) {
			cmd := exec.Command("ip", "netns", "exec", a, bin, filepath.Join(work, "served.lpg"), "vA", socket)
			var out bytes.Buffer
			cmd.Stdout = &out
			errp, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var log strings.Builder
			ready := make(chan bool, 1)
			go func() {
				sc := bufio.NewScanner(errp)
				sent := false
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
					if sc.Text() == "READY" && !sent {
						ready <- true
						sent = true
					}
				}
				if !sent {
					ready <- false
				}
			}()
			select {
			case ok := <-ready:
				if !ok {
					cmd.Wait()
					t.Fatalf("the program stopped before serving:\n%s", log.String())
				}
			case <-time.After(time.Minute):
				t.Fatal("the program did not serve within a minute")
			}
			err = inNS(b, func() error {
				for _, c := range []struct {
					port      int
					msg, want string
				}{{7, "built-in echo", "built-in echo"}, {7007, "own handler", "reldnah nwo"}} {
					got, err := udpExchange(c.port, []byte(c.msg))
					if err != nil {
						return fmt.Errorf("port %d: %w", c.port, err)
					}
					if string(got) != c.want {
						return fmt.Errorf("port %d answered %q, want %q", c.port, got, c.want)
					}
				}
				return nil
			})
			cmd.Process.Signal(syscall.SIGTERM)
			werr := cmd.Wait()
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			if werr != nil {
				t.Fatalf("the program: %v\n%s", werr, log.String())
			}
			if !strings.Contains(out.String(), "final:") || !strings.Contains(out.String(), "deliver echo2 1") {
				t.Errorf("final counters:\n%s", out.String())
			}
			show := ip(t, "-n", a, "-d", "link", "show", "vA")
			if strings.Contains(show, "xdp") {
				t.Errorf("an XDP program is left on vA:\n%s", show)
			}
			t.Logf("the program said:\n%s%s", log.String(), out.String())
		})
	}
}

// TestServeCodeRefuses checks ServeCode's one-line errors for code that
// is not the stack's and handlers for what is not a UDP endpoint.
func TestServeCodeRefuses(t *testing.T) {
	src := strings.Replace(testStack, "    service arp\n", "    service arp\n    endpoint web tcp listen *:80 { app \"kernel\" }\n", 1)
	r, st := embedTest(t, src)
	var names []string
	for _, e := range st.Endpoints {
		names = append(names, e.Name)
	}
	process := func(int, []byte) Verdict { return Verdict{} }
	cases := []struct {
		code     Code
		handlers map[string]Handler
		want     string
	}{
		{Code{Endpoints: names}, nil, "the code has no Process function"},
		{Code{Process: process, Endpoints: names[:2]}, nil, "the code's endpoints (echo, echo2) are not stack served's (echo, echo2, sink, mx, web)"},
		{Code{Process: process, Endpoints: names}, map[string]Handler{"dns": testEcho}, "a handler for dns, which is not an endpoint of stack served"},
		{Code{Process: process, Endpoints: names}, map[string]Handler{"web": testEcho}, "a handler for web, a TCP endpoint: dragonc has no TCP of its own"},
	}
	for _, c := range cases {
		err := ServeCode(t.Context(), r, st, c.code, c.handlers, Options{Iface: "lo"})
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != c.want && !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// testEcho is a handler for the table above.
var testEcho Handler = func(d *Datagram) []byte { return d.Payload }

// Package run serves a compiled stack on a Linux interface: the plan's
// steering becomes the linux-xdp model's eBPF stage (hash maps filled from
// the plan's tables), the generated code runs on one receive loop per plan
// queue (package dataplane), replies and endpoint sends go out through the
// LPG's transmit chains, and on return everything attached is detached.
//
// `dragonc run` builds the generated code and the data plane into a
// helper program and starts it with the eBPF programs as inherited file
// descriptors; the programs and the tc attachment stay with this process
// (bpf links die with it, so nothing is left attached even after a kill).
package run

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
)

// Model is the built-in model whose tables this package fills.
const Model = "linux-xdp"

// Options controls Serve.
type Options struct {
	Iface  string
	Every  time.Duration // counter report interval; 0: only on SIGUSR1 and at the end
	Stdout io.Writer     // where the counters go
	Stderr io.Writer     // notes and the helper's errors
	// Ready, if set, is called once every queue is receiving.
	Ready func()
	// Signal, if set, receives the helper's process so that a caller can
	// send it SIGUSR1.
	Signal func(p *os.Process)
}

// UsageError is an error in what the user asked for (a missing or down
// interface, a plan for another NIC), as opposed to a failure while
// running.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// Serve serves the stack of r on opt.Iface until ctx ends.
func Serve(ctx context.Context, r *dembed.Result, st *lpg.Stack, opt Options) (err error) {
	if opt.Stdout == nil {
		opt.Stdout = io.Discard
	}
	if opt.Stderr == nil {
		opt.Stderr = io.Discard
	}
	pl := r.Plan
	if pl.NIC != Model {
		return usage("dragonc run serves plans for the %s model; this plan is for %s (applying a hardware plan first is not built yet)", Model, pl.NIC)
	}
	ifc, err := net.InterfaceByName(opt.Iface)
	if err != nil {
		return usage("no interface %s: %v", opt.Iface, err)
	}
	if ifc.Flags&net.FlagUp == 0 {
		return usage("interface %s is down (ip link set dev %s up)", opt.Iface, opt.Iface)
	}
	if len(st.Interfaces) != 1 {
		return usage("stack %s declares %d interfaces; dragonc run serves a stack with one", st.Name, len(st.Interfaces))
	}
	mac := st.Interfaces[0].MAC
	if got := macValue(ifc.HardwareAddr); got != mac {
		return usage("interface %s has address %s but stack %s declares %s (ip link set dev %s address %s)", opt.Iface, ifc.HardwareAddr, st.Name, macString(mac), opt.Iface, macString(mac))
	}
	if os.Geteuid() != 0 {
		return usage("dragonc run needs root (CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF) to open packet sockets and load eBPF programs")
	}

	stage, err := StageOf(pl, st)
	if err != nil {
		return err
	}
	g, err := lpg.Derive(st)
	if err != nil {
		return err
	}
	chains, err := TxChains(g, pl)
	if err != nil {
		return err
	}
	handlers := make([]string, len(st.Endpoints))
	for i, e := range st.Endpoints {
		switch {
		case e.Proto != lpg.UDP:
			if e.Proto == lpg.TCP {
				fmt.Fprintf(opt.Stderr, "dragonc run: endpoint %s: TCP stays with the kernel (dragonc has no TCP of its own); its frames pass up\n", e.Name)
			}
		case e.App == "echo":
			handlers[i] = "Echo"
		case e.App == "discard":
			handlers[i] = "Discard"
		default:
			handlers[i] = "Discard"
			fmt.Fprintf(opt.Stderr, "dragonc run: endpoint %s: app %q is not built in (echo, discard); its datagrams are counted and discarded\n", e.Name, e.App)
		}
	}

	work, err := os.MkdirTemp("", "dragonc-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin, err := buildHelper(work, r, st, chains, handlers, mac)
	if err != nil {
		return err
	}

	m, err := newMaps(stage, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	var progs []*ebpf.Program
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	for _, kind := range []int{progFanout, progFilter, progTC} {
		p, err := loadProgram(kind, stage, m)
		if err != nil {
			return err
		}
		progs = append(progs, p)
	}
	// The kernel's taps (packet sockets) see a frame before tc ingress, so
	// the tc program hides the stack's frames from the kernel's own stack
	// (which would answer ARP and ping a second time) after the sockets
	// have them.
	tc, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: progs[2], Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return fmt.Errorf("attaching the tc ingress program to %s: %w", opt.Iface, err)
	}
	defer tc.Close()

	var queues []string
	for _, q := range pl.Queues {
		queues = append(queues, fmt.Sprintf("%d:%d", q.ID, q.Core))
	}
	cmd := exec.Command(bin, "-ifindex", strconv.Itoa(ifc.Index), "-queues", strings.Join(queues, ","),
		"-fanout-fd", "3", "-filter-fd", "4", "-every", opt.Every.String())
	fan, err := dupFile(progs[0].FD(), "fanout")
	if err != nil {
		return err
	}
	defer fan.Close()
	filt, err := dupFile(progs[1].FD(), "filter")
	if err != nil {
		return err
	}
	defer filt.Close()
	cmd.ExtraFiles = []*os.File{fan, filt}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the generated stack: %w", err)
	}
	fmt.Fprintf(opt.Stderr, "dragonc run: serving %s on %s: %d queues, AF_PACKET (TPACKET_V2 ring, eBPF fanout) with a tc ingress program; AF_XDP is not built yet\n", st.Name, opt.Iface, len(pl.Queues))
	if opt.Signal != nil {
		opt.Signal(cmd.Process)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "ready: ") {
				if opt.Ready != nil {
					opt.Ready()
				}
				continue
			}
			fmt.Fprintln(opt.Stdout, line)
		}
	}()
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			err = <-done
		}
		if err == nil || ctx.Err() != nil && isSignal(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("the generated stack stopped: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func isSignal(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

func dupFile(fd int, name string) (*os.File, error) {
	d, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("duplicating the %s program: %w", name, err)
	}
	return os.NewFile(uintptr(d), name), nil
}

func macValue(hw net.HardwareAddr) uint64 {
	var v uint64
	for _, b := range hw {
		v = v<<8 | uint64(b)
	}
	return v
}

func macString(v uint64) string {
	hw := make(net.HardwareAddr, 6)
	for i := range 6 {
		hw[i] = byte(v >> (8 * (5 - i)))
	}
	return hw.String()
}

// StageOf reads the eBPF stage's tables off a linux-xdp plan.
func StageOf(pl *dembed.Plan, st *lpg.Stack) (*Stage, error) {
	s := &Stage{ARP: st.ARP, ICMP: st.ICMPEcho, FlowCap: FlowCapacity, PortCap: PortCapacity}
	for _, a := range append(st.Unicast(), st.Broadcasts()...) {
		s.Addrs = append(s.Addrs, pred.Addr(a))
	}
	for _, e := range st.Endpoints {
		if e.Proto == lpg.OpenMX {
			s.OpenMX = true
		}
	}
	for _, c := range pl.Config {
		if c.Kind != "table" {
			continue
		}
		for _, e := range c.Entries {
			q, err := strconv.Atoi(strings.TrimPrefix(e.Action, "RxQueue"))
			if err != nil || !strings.HasPrefix(e.Action, "RxQueue") {
				return nil, fmt.Errorf("%s: action %s is not a queue", c.Node, e.Action)
			}
			v := map[string]uint64{}
			for _, f := range e.Fields {
				if f.Mask != 0 {
					return nil, fmt.Errorf("%s: a masked field (%s) in an exact-match table", c.Node, f.Field)
				}
				v[f.Field] = f.Value
			}
			switch c.Node {
			case "RxCFlow":
				s.Flows = append(s.Flows, FlowRule{Proto: uint8(v["ip.proto"]), Src: pred.Addr(uint32(v["ip.src"])), Dst: pred.Addr(uint32(v["ip.dst"])),
					SPort: uint16(v["l4.sport"]), DPort: uint16(v["l4.dport"]), Queue: uint32(q)})
			case "RxCPort":
				s.Ports = append(s.Ports, PortRule{Proto: uint8(v["ip.proto"]), DPort: uint16(v["l4.dport"]), Queue: uint32(q)})
			default:
				return nil, fmt.Errorf("the eBPF stage has no table %s", c.Node)
			}
		}
	}
	return s, nil
}

// Capacities of the stage's tables: the max_entries of its hash maps,
// which the model declares (nics/linux-xdp.prg).
const (
	FlowCapacity = 65536
	PortCapacity = 65536
)

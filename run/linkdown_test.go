package run

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// linkDownStack has an echo endpoint on each queue's core.
const linkDownStack = `stack link_down {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint e0 udp listen 10.9.0.1:7000 { app "echo" cores 0..0 }
    endpoint e1 udp listen 10.9.0.1:7001 { app "echo" cores 1..1 }
    service arp
    service icmp-echo
}
`

// TestServeAfterLinkDown: the interface goes down and up again while
// run serves; both echo endpoints answer afterwards, and no answer is
// lost to the error the interface's going down left pending on a packet
// socket (packet_notifier sets ENETDOWN, which the next send returns:
// before, every loop spun on poll(2)'s POLLERR for as long as nothing
// took it back, and the first answers after the link came up failed).
// An AF_PACKET loop takes the error back once and counts it.
func TestServeAfterLinkDown(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) {
			a, b := pair(t)
			r, st := embedTest(t, linkDownStack)
			bg := serveInBackground(t, a, r, st, Options{Iface: "vA", Socket: socket, Every: 100 * time.Millisecond})
			echo := func(when string) {
				t.Helper()
				err := inNS(b, func() error {
					for _, port := range []int{7000, 7001} {
						msg := []byte(fmt.Sprintf("%s %d", when, port))
						got, err := udpExchange(port, msg)
						if err != nil {
							return fmt.Errorf("port %d: %w", port, err)
						}
						if string(got) != string(msg) {
							return fmt.Errorf("port %d answered %q to %q", port, got, msg)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("echo %s: %v\n%s", when, err, bg.log.String())
				}
			}
			echo("before")
			ip(t, "-n", a, "link", "set", "vA", "down")
			if socket == "packet" {
				// Each loop wakes to its socket's error and takes it back.
				deadline := time.Now().Add(10 * time.Second)
				for !allQueues(bg, func(e uint64) bool { return e >= 1 }) {
					if time.Now().After(deadline) {
						t.Fatalf("no loop counted the interface going down within 10s: %+v\n%s", bg.report().Queues, bg.log.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			ip(t, "-n", a, "link", "set", "vA", "up")
			echo("after")
			// run said so, as it happened (rtnetlink: watchLink).
			for _, want := range []string{"dragonc run: vA is down: nothing is received or sent", "dragonc run: vA is up again: serving"} {
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(bg.log.String(), want) {
					if time.Now().After(deadline) {
						t.Fatalf("run did not say %q within 10s\n%s", want, bg.log.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			bg.stop(t)
			for _, q := range bg.report().Queues {
				if q.SendErrors != 0 {
					t.Errorf("queue %d: %d send errors (last socket error %q)", q.Queue, q.SendErrors, q.LastSocketError)
				}
				// One going down, one error per socket: a loop that
				// counted but did not take it back would count on.
				max := uint64(0)
				if socket == "packet" {
					max = 1
				}
				if q.SocketErrors > max || (q.SocketErrors > 0 && q.LastSocketError != "network is down") {
					t.Errorf("queue %d: %d socket errors, the last %q; want at most %d, ENETDOWN", q.Queue, q.SocketErrors, q.LastSocketError, max)
				}
			}
		})
	}
}

// allQueues says whether every queue of the last report has socket
// errors that ok accepts.
func allQueues(bg *background, ok func(uint64) bool) bool {
	qs := bg.report().Queues
	for _, q := range qs {
		if !ok(q.SocketErrors) {
			return false
		}
	}
	return len(qs) > 0
}

// TestServeEndsWhenLinkGoes: a run whose interface is deleted stops, on
// both socket kinds, with an error that says so, instead of serving
// nothing for ever.
func TestServeEndsWhenLinkGoes(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) {
			a, _ := pair(t)
			r, st := embedTest(t, linkDownStack)
			bg := serveInBackground(t, a, r, st, Options{Iface: "vA", Socket: socket})
			ip(t, "-n", a, "link", "del", "vA")
			select {
			case err := <-bg.served:
				if !errors.Is(err, errLinkGone) || !strings.Contains(err.Error(), "interface vA went away") {
					t.Fatalf("Serve returned %v, want interface vA went away\n%s", err, bg.log.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("Serve went on for 30s after its interface was deleted\n%s", bg.log.String())
			}
			if !strings.Contains(bg.log.String(), "dragonc run: vA went away (deleted, or moved to another network namespace): stopping") {
				t.Errorf("run did not say why it stopped\n%s", bg.log.String())
			}
		})
	}
}

// TestXDPHook: --xdp-mode driver and generic are taken as given; auto is
// the generic hook on a veth and driver mode (falling back to generic)
// on another driver, here a bridge; attaching there says which
// mode it ran in.
func TestXDPHook(t *testing.T) {
	a, _ := pair(t)
	ip(t, "-n", a, "link", "add", "d0", "type", "bridge")
	err := inNS(a, func() error {
		veth, err := net.InterfaceByName("vA")
		if err != nil {
			return err
		}
		bridge, err := net.InterfaceByName("d0")
		if err != nil {
			return err
		}
		for _, c := range []struct {
			mode string
			ifc  *net.Interface
			want string
		}{
			{"driver", veth, xdpDriver}, {"generic", veth, xdpGeneric}, {"auto", veth, xdpGeneric}, {"", veth, xdpGeneric},
			{"auto", bridge, xdpAuto}, {"generic", bridge, xdpGeneric},
		} {
			drv, err := deviceDriver(c.ifc.Name)
			if err != nil {
				return err
			}
			if got := xdpHook(c.mode, drv); got != c.want {
				return fmt.Errorf("xdpHook(%q, %s) = %q, want %q", c.mode, c.ifc.Name, got, c.want)
			}
		}
		// A bridge has no XDP of its own: auto falls back to generic.
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}}) // XDP_PASS
		if err != nil {
			return err
		}
		defer prog.Close()
		l, mode, err := attachXDP(prog, bridge, xdpAuto)
		if err != nil {
			return err
		}
		defer l.Close()
		if mode != xdpGeneric {
			return fmt.Errorf("auto on a bridge attached in %s mode, want generic", mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

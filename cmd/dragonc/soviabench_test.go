package main

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/bench/sovialat"
	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/sovia"
)

// TestSoviaBench measures, from a second namespace, a SOVIA echo stream
// served over the software VI beside a kernel TCP echo server on the
// other end of a veth: the peer is named by its IPv4 address, found with
// ARP; then by its MAC, without bandwidth, as a table.
func TestSoviaBench(t *testing.T) {
	a, b := netnstest.Two(t)
	netnstest.IP(t, "link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "vB", "netns", b)
	netnstest.IP(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:01", "up")
	netnstest.IP(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	netnstest.IP(t, "-n", b, "addr", "add", "10.9.0.2/24", "dev", "vB")
	netnstest.IP(t, "-n", b, "link", "set", "vB", "up")
	netnstest.Running(t, a, "vA")
	netnstest.Running(t, b, "vB")
	var host *sovia.RawHost
	var tl net.Listener
	err := netnstest.In(a, func() (err error) {
		if host, err = sovia.OpenHost("vA"); err != nil {
			return err
		}
		l, err := host.Listen(7000, sovia.PaperParams())
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := l.AcceptConn()
				if err != nil {
					return
				}
				sovia.Apps["echo"](c)
				c.Close()
			}
		}()
		tl, err = net.Listen("tcp4", "10.9.0.1:7")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer tl.Close()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	var code int
	var out, errs string
	netnstest.In(b, func() error {
		code, out, errs = dragonc(t, "sovia", "bench", "--json", "--size", "4,2048,40000", "--rounds", "2", "--exchanges", "10",
			"--stream-bytes", "65536", "--tcp", "10.9.0.1:7", "vB", "10.9.0.1:7000")
		return nil
	})
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	var rep struct {
		PeerMAC string `json:"peer_mac"`
		sovialat.Result
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.PeerMAC != "02:00:00:00:00:01" || rep.Rounds != 2 || len(rep.Sizes) != 3 || rep.Sizes[2].Size != 40000 {
		t.Fatalf("report: %s", out)
	}
	for _, s := range rep.Sizes {
		if len(s.Of) != 2 || s.Of[0].Target != "sovia" || s.Of[1].Target != "tcp" {
			t.Fatalf("%d B: targets %+v", s.Size, s.Of)
		}
		for _, m := range s.Of {
			if m.Samples != 20 || !(m.Mbps > 0) {
				t.Errorf("%d B, %s: %+v", s.Size, m.Target, m)
			}
		}
	}

	// Again from the same address, by the peer's: a second process's
	// host may dial from the VI number of the first (issue 41's
	// alternating clients).
	netnstest.In(b, func() error {
		code, out, errs = dragonc(t, "sovia", "bench", "--size", "64", "--rounds", "1", "--exchanges", "5", "--stream-bytes", "0", "--spin", "20us", "vB", "[02:00:00:00:00:01]:7000")
		return nil
	})
	if code != 0 || !strings.Contains(out, "to 02:00:00:00:00:01 port 7000") || !strings.Contains(out, "sovia p50 µs") || strings.Contains(out, "tcp p50") ||
		!strings.Contains(out, "look for the echo for up to 20µs") {
		t.Errorf("exit %d, output:\n%s\nstderr:\n%s", code, out, errs)
	}
	// A port no one listens on is refused, and said so.
	netnstest.In(b, func() error {
		code, out, errs = dragonc(t, "sovia", "bench", "--size", "64", "vB", "[02:00:00:00:00:01]:7001")
		return nil
	})
	if code != 1 || !strings.Contains(errs, "refused port 7001") {
		t.Errorf("a closed port: exit %d, stderr %q", code, errs)
	}
}

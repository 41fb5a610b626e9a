package run

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// stackMAC and the peer's addresses of the namespace suite (pair).
var (
	stackMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	stackIP  = net.IP{10, 9, 0, 1}
	peerAddr = net.IP{10, 9, 0, 2}
	bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// wire is the peer's raw view of vB: it sends frames it builds and keeps
// every frame the stack sends, until closed.
type wire struct {
	fd   int
	mac  net.HardwareAddr
	idx  int
	mu   sync.Mutex
	got  [][]byte
	done chan struct{}
}

func openWire(ifname string) (*wire, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	tv := syscall.NsecToTimeval(int64(50 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	w := &wire{fd: fd, mac: ifc.HardwareAddr, idx: ifc.Index, done: make(chan struct{})}
	go w.read()
	return w, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (w *wire) read() {
	defer close(w.done)
	buf := make([]byte, 4096)
	for {
		n, from, err := syscall.Recvfrom(w.fd, buf, 0)
		if err == syscall.EBADF || err == syscall.EINVAL {
			return
		}
		if err != nil {
			continue // the read timeout: look again
		}
		if ll, ok := from.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == syscall.PACKET_OUTGOING {
			continue
		}
		if n < 14 || !bytes.Equal(buf[6:12], stackMAC) || binary.BigEndian.Uint16(buf[12:]) == 0x86dd {
			continue // not the stack's (the kernel of its namespace sends IPv6 on vA)
		}
		w.mu.Lock()
		w.got = append(w.got, bytes.Clone(buf[:n]))
		w.mu.Unlock()
	}
}

func (w *wire) close() {
	syscall.Close(w.fd)
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
	}
}

func (w *wire) send(frame []byte) error {
	return syscall.Sendto(w.fd, frame, 0, &syscall.SockaddrLinklayer{Ifindex: w.idx, Halen: 6})
}

// frames returns what the stack sent so far.
func (w *wire) frames() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.got...)
}

// until waits up to two seconds for a frame the stack sent that ok
// accepts, sending probe again every 200 ms (a datagram may be lost).
func (w *wire) until(probe []byte, ok func([]byte) bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		w.send(probe)
		for wait := time.Now().Add(200 * time.Millisecond); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
			for _, f := range w.frames() {
				if ok(f) {
					return true
				}
			}
		}
	}
	return false
}

// hostile describes one frame: its layers, then changes to its bytes.
type hostile struct {
	srcMAC, dstMAC net.HardwareAddr
	vlan           int // -1: untagged
	src, dst       net.IP
	icmp           bool // an echo request, not a UDP datagram
	sport, dport   uint16
	payload        string
	cut            int  // bytes cut off the end
	nocsum         bool // UDP without a checksum (RFC 768: zero)
}

func build(h hostile) []byte {
	if h.srcMAC == nil {
		h.srcMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	}
	if h.dstMAC == nil {
		h.dstMAC = stackMAC
	}
	if h.src == nil {
		h.src = peerAddr
	}
	if h.dst == nil {
		h.dst = stackIP
	}
	eth := &layers.Ethernet{SrcMAC: h.srcMAC, DstMAC: h.dstMAC, EthernetType: layers.EthernetTypeIPv4}
	ls := []gopacket.SerializableLayer{eth}
	if h.vlan >= 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(h.vlan), Type: layers.EthernetTypeIPv4})
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, SrcIP: h.src, DstIP: h.dst, Protocol: layers.IPProtocolUDP}
	ls = append(ls, ip)
	if h.icmp {
		ip.Protocol = layers.IPProtocolICMPv4
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 1})
	} else {
		u := &layers.UDP{SrcPort: layers.UDPPort(h.sport), DstPort: layers.UDPPort(h.dport)}
		u.SetNetworkLayerForChecksum(ip)
		ls = append(ls, u)
	}
	ls = append(ls, gopacket.Payload(h.payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		panic(err)
	}
	b := buf.Bytes()
	if h.nocsum {
		at := 14 + 20 + 6 // the UDP checksum of an untagged frame
		if h.vlan >= 0 {
			at += 4
		}
		b[at], b[at+1] = 0, 0
	}
	return b[:len(b)-h.cut]
}

// arpRequest builds an ARP request for tpa from sha/spa.
func arpRequest(src, sha net.HardwareAddr, spa, tpa net.IP) []byte {
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: src, DstMAC: bcastMAC, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: sha, SourceProtAddress: spa.To4(), DstHwAddress: make([]byte, 6), DstProtAddress: tpa.To4()})
	if err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// udpOf returns the source and destination address, ports and payload of
// a UDP frame the stack sent, or ok false.
func udpOf(f []byte) (src, dst net.IP, sport, dport uint16, payload []byte, ok bool) {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	u, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if ip == nil || u == nil {
		return nil, nil, 0, 0, nil, false
	}
	return ip.SrcIP, ip.DstIP, uint16(u.SrcPort), uint16(u.DstPort), u.Payload, true
}

// TestHostilePeers plays an attacker on the stack's segment (issue 37's
// findings), once on each socket kind, and checks the peer's view: what
// the stack answers, from which address, and what it leaves unanswered.
func TestHostilePeers(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testHostile(t, socket) })
	}
}

func testHostile(t *testing.T, socket string) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	sv := serveIn(t, a, r, st, socket)

	err := inNS(b, func() error {
		w, err := openWire("vB")
		if err != nil {
			return err
		}
		defer w.close()
		// The peer's own echo, to learn that the stack serves and, at
		// the end, that it has answered all it was going to.
		echoed := func(payload string) func([]byte) bool {
			return func(f []byte) bool {
				_, _, _, _, p, ok := udpOf(f)
				return ok && string(p) == payload
			}
		}
		control := func(n int) error {
			msg := fmt.Sprintf("control %d", n)
			if !w.until(build(hostile{vlan: -1, sport: 40000, dport: 7, payload: msg}), echoed(msg)) {
				return fmt.Errorf("the control echo %d was not answered", n)
			}
			return nil
		}
		if err := control(0); err != nil {
			return err
		}

		// Frames that must draw no answer at all: each carries a payload
		// no answer may contain and a source port no error may quote.
		silent := []struct {
			what string
			h    hostile
		}{
			{"echo to the limited broadcast (fraggle)", hostile{dstMAC: bcastMAC, dst: net.IP{255, 255, 255, 255}, dport: 7}},
			{"echo to the directed broadcast (fraggle)", hostile{dstMAC: bcastMAC, dst: net.IP{10, 9, 0, 255}, dport: 7}},
			{"echo to the directed broadcast at our MAC", hostile{dst: net.IP{10, 9, 0, 255}, dport: 7}},
			{"a broadcast to a listener bound to one address", hostile{dstMAC: bcastMAC, dst: net.IP{10, 9, 0, 255}, dport: 7007}},
			{"a datagram cut short of its length", hostile{dport: 7, cut: 14}},
			{"a 17-byte datagram cut to a 45-byte frame (a runt)", hostile{dport: 7, cut: 14, payload: "hostile, 17 bytes", nocsum: true}},
			{"echo from the broadcast MAC", hostile{srcMAC: bcastMAC, dport: 7}},
			{"echo from a multicast MAC", hostile{srcMAC: net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, dport: 7}},
			{"a closed port from a class E source", hostile{src: net.IP{240, 0, 0, 1}, dport: 4444}},
			{"a closed port from the broadcast MAC", hostile{srcMAC: bcastMAC, dport: 4444}},
			{"echo from port 0", hostile{dport: 7, sport: 0}},
			{"echo from echo's own port 7", hostile{dport: 7, sport: 7}},
			{"echo from chargen's port 19", hostile{dport: 7, sport: 19}},
			{"echo in VLAN 5, which no interface declares", hostile{vlan: 5, dport: 7}},
			{"a ping from the broadcast MAC", hostile{srcMAC: bcastMAC, icmp: true}},
		}
		for i := range silent {
			h := &silent[i].h
			if h.vlan == 0 {
				h.vlan = -1
			}
			if h.sport == 0 && !strings.Contains(silent[i].what, "port 0") {
				h.sport = uint16(41000 + i)
			}
			if h.payload == "" {
				h.payload = fmt.Sprintf("hostile %d, long enough to fill a minimum frame", i)
			}
			for range 3 {
				if err := w.send(build(*h)); err != nil {
					return fmt.Errorf("%s: %w", silent[i].what, err)
				}
			}
		}
		// ARP requests from senders no host may be; a good one is
		// answered (below).
		spoof := net.HardwareAddr{2, 0, 0, 0, 0, 0x66}
		for _, r := range [][]byte{
			arpRequest(spoof, spoof, net.IP{0, 1, 2, 3}, stackIP),                                         // 0/8, not a probe
			arpRequest(spoof, spoof, stackIP, stackIP),                                                    // our own address
			arpRequest(spoof, spoof, net.IP{255, 255, 255, 255}, stackIP),                                 // the broadcast
			arpRequest(spoof, spoof, net.IP{224, 0, 0, 1}, stackIP),                                       // a multicast address
			arpRequest(spoof, net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, peerAddr, stackIP),                // a group sender MAC
			arpRequest(bcastMAC, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, peerAddr, stackIP), // from the broadcast
		} {
			w.send(r)
		}
		good := net.HardwareAddr{2, 0, 0, 0, 0, 0x77}
		if !w.until(arpRequest(good, good, net.IP{10, 9, 0, 77}, stackIP), func(f []byte) bool {
			a, ok := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default).Layer(layers.LayerTypeARP).(*layers.ARP)
			return ok && a.Operation == layers.ARPReply && bytes.Equal(a.DstHwAddress, good)
		}) {
			return fmt.Errorf("a good ARP request was not answered")
		}
		// Priority-tagged (VID 0) frames are untagged ones to the LPG:
		// answered, untagged, on both socket kinds.
		tagged := "priority-tagged echo"
		if !w.until(build(hostile{vlan: 0, sport: 40001, dport: 7, payload: tagged}), echoed(tagged)) {
			return fmt.Errorf("a priority-tagged echo (VID 0) was not answered")
		}
		// A flood of datagrams to a closed port from one peer: the ICMP
		// errors stop after the peer's burst (6, Linux's
		// XRLIM_BURST_FACTOR) and one a second after that.
		start := time.Now()
		for i := range 200 {
			w.send(build(hostile{vlan: -1, sport: 50000, dport: 4444, payload: fmt.Sprintf("flood %d", i)}))
		}
		if err := control(1); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // answers from other queues come in too
		elapsed := time.Since(start)

		unreach, arps := 0, 0
		for _, f := range w.frames() {
			if f[0]&1 != 0 {
				t.Errorf("the stack sent a frame to group address %x: %x", f[0:6], f)
			}
			p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			if a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
				arps++
				if bytes.Equal(a.DstHwAddress, good) {
					continue
				}
				if bytes.Equal(a.DstHwAddress, spoof) || a.DstHwAddress[0]&1 != 0 || !net.IP(a.DstProtAddress).Equal(peerAddr) {
					t.Errorf("an ARP reply to a sender no host may be: %x", f)
				}
				continue
			}
			ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if ip == nil {
				continue
			}
			if s := ip.SrcIP.To4(); s[0] >= 224 || s[3] == 255 || s[0] == 0 || s[0] == 127 {
				t.Errorf("the stack answered from %v: %x", ip.SrcIP, f)
			}
			if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && (strings.HasPrefix(string(u.Payload), "hostile") || u.DstPort >= 41000 && u.DstPort < 41100) {
				t.Errorf("answered %q to %v:%d", u.Payload, ip.DstIP, u.DstPort)
			}
			if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && ic.TypeCode.Type() == 3 {
				quoted := ic.Payload
				if len(quoted) >= 28 {
					sport := binary.BigEndian.Uint16(quoted[20:22])
					switch {
					case sport == 50000:
						unreach++
					case sport >= 41000 && sport < 41100:
						t.Errorf("an ICMP error for hostile frame %d (%s) to %v", sport-41000, silent[sport-41000].what, ip.DstIP)
					}
				}
			}
			if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && ic.TypeCode.Type() == 0 {
				t.Errorf("an echo reply to a ping from the broadcast MAC, to %v", ip.DstIP)
			}
		}
		// 6 at once and one for each second gone by since.
		if most := 6 + int(elapsed/time.Second) + 1; unreach < 1 || unreach > most {
			t.Errorf("200 datagrams to a closed port drew %d port unreachables in %v; want 1..%d", unreach, elapsed, most)
		}
		t.Logf("%d port unreachables for 200 datagrams to a closed port in %v; %d ARP replies", unreach, elapsed, arps)
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nrun said:\n%s%s", err, sv.log.String(), sv.out.String())
	}
	if err := sv.stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, sv.log.String())
	}
	if !strings.Contains(sv.final(), "icmp errors rate-limited") {
		t.Errorf("the counters do not show the rate-limited ICMP errors:\n%s", sv.final())
	}
	t.Logf("run said:\n%s", sv.final())
}

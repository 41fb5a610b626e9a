package run

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
)

// TestTxOffload builds every frame a stack sends (ARP and ICMP echo
// replies, port unreachables, UDP datagrams) through its transmit chains
// as the plan splits them, the checksums the plan leaves to the NIC filled
// the NIC's way at the end, on every NIC, target and example. Each frame
// must equal the one the LPG alone builds, byte for byte, and its
// checksums must verify by gopacket's own computation (RFC 791 §3.1, RFC
// 768, RFC 792). The 82599 and 82576 offload the transport checksums on
// Linux and the IPv4 header checksum too on the silicon.
func TestTxOffload(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	offloaded := map[string][]string{}
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon", "dragonet-e10k", "dragonet-sf"} {
		for _, target := range []string{dembed.TargetSilicon, dembed.TargetLinux} {
			if strings.HasPrefix(nic, "dragonet-") && target == dembed.TargetLinux {
				continue // no Linux driver
			}
			for _, ex := range examples {
				name := nic + "/" + target + "/" + strings.TrimSuffix(filepath.Base(ex), ".lpg")
				r, st := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, target)
				planned, err := TxChains(r.Embedding.LPG, r.Plan, st)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				soft, err := TxChains(r.Embedding.LPG, &plan.Plan{}, st)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, c := range txCases(st, planned, soft) {
					if strings.Contains(strings.Join(c.plan, " "), dataplane.NICPrefix) {
						offloaded[nic+"/"+target] = appendNew(offloaded[nic+"/"+target], c.plan...)
					}
					got, flags := c.build(t, c.plan)
					want, none := c.build(t, c.soft)
					if none != 0 || flags != wantFlags(c.plan) {
						t.Errorf("%s %s: descriptor flags %#x with %v (the LPG's chain: %#x)", name, c.name, flags, c.plan, none)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s %s: the frame with %v differs from the LPG's\n got %x\nwant %x", name, c.name, c.plan, got, want)
					}
					if err := checksumsOK(got); err != nil {
						t.Errorf("%s %s: %v (%x)", name, c.name, err, got)
					}
				}
			}
		}
	}
	// The offloads the models and drivers promise.
	want := map[string][]string{
		"82599/silicon": {"nic:TxL3IPv4FillChecksum", "nic:TxL4UDPFillChecksum"},
		"82599/linux":   {"nic:TxL4UDPFillChecksum"},
		"82576/silicon": {"nic:TxL3IPv4FillChecksum", "nic:TxL4UDPFillChecksum"},
		"82576/linux":   {"nic:TxL4UDPFillChecksum"},
	}
	for k, names := range want {
		for _, n := range names {
			if !slices.Contains(offloaded[k], n) {
				t.Errorf("%s: no chain leaves %s to the NIC (offloaded: %v)", k, strings.TrimPrefix(n, dataplane.NICPrefix), offloaded[k])
			}
		}
	}
	for k, names := range offloaded {
		if slices.Contains(names, "nic:TxL3IPv4FillChecksum") && strings.HasSuffix(k, "/linux") {
			t.Errorf("%s: the IPv4 header checksum is left to the NIC, but Linux fills it itself", k)
		}
		if nic := strings.Split(k, "/")[0]; nic != "82599" && nic != "82576" {
			t.Errorf("%s has no transmit offload in its model, yet %v", k, names)
		}
	}
}

type txCase struct {
	name       string
	plan, soft []string
	build      func(t *testing.T, chain []string) ([]byte, uint8)
}

// wantFlags is what a chain asks of the NIC: IXSM for the IPv4 header
// checksum, TXSM for a transport checksum.
func wantFlags(chain []string) uint8 {
	var f uint8
	for _, n := range chain {
		switch n {
		case dataplane.NICPrefix + "TxL3IPv4FillChecksum":
			f |= dataplane.TxInsertIPv4Checksum
		case dataplane.NICPrefix + "TxL4UDPFillChecksum", dataplane.NICPrefix + "TxL4TCPFillChecksum":
			f |= dataplane.TxInsertL4Checksum
		}
	}
	return f
}

// txCases lists a request and its chains for every transmit path the
// stack has.
func txCases(st *lpg.Stack, plan, soft *Chains) []txCase {
	in := st.Interfaces[0]
	mac := net.HardwareAddr{byte(in.MAC >> 40), byte(in.MAC >> 32), byte(in.MAC >> 24), byte(in.MAC >> 16), byte(in.MAC >> 8), byte(in.MAC)}
	var us net.IP
	for _, a := range st.Unicast() {
		us = net.IP{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
		break
	}
	peer := net.IP{us[0], us[1], us[2], us[3] ^ 0x7e}
	run := func(req []byte, prep func(*dataplane.Tx)) func(t *testing.T, chain []string) ([]byte, uint8) {
		return func(t *testing.T, chain []string) ([]byte, uint8) {
			fs, err := dataplane.Bind(chain)
			if err != nil {
				t.Fatal(err)
			}
			tx := &dataplane.Tx{Req: req, Buf: make([]byte, 1514)}
			copy(tx.MAC[:], mac)
			if prep != nil {
				prep(tx)
			}
			for _, f := range fs {
				if !f(tx) {
					t.Fatalf("%v stopped on %x", chain, req)
				}
			}
			return slices.Clone(tx.Buf[:tx.N]), tx.Flags
		}
	}
	var out []txCase
	add := func(name string, p, s []string, build func(*testing.T, []string) ([]byte, uint8)) {
		if len(s) > 0 {
			out = append(out, txCase{name, p, s, build})
		}
	}
	echo := packet.MustBuild(packet.Spec{DstMAC: mac, Src: peer, Dst: us, Proto: packet.ProtoICMP, ICMPType: 8, Payload: []byte("dragonc echo payload, odd!")})
	add("icmp echo", plan.Replies["icmp-echo"], soft.Replies["icmp-echo"], run(echo, nil))
	arp := packet.MustBuild(packet.Spec{DstMAC: mac, EtherType: packet.EtherTypeARP, ARPOp: 1, ARPTarget: us, Src: peer})
	add("arp", plan.Replies["arp"], soft.Replies["arp"], run(arp, nil))
	closed := packet.MustBuild(packet.Spec{DstMAC: mac, Src: peer, Dst: us, Proto: packet.ProtoUDP, SrcPort: 4000, DstPort: 9, Payload: []byte("nobody")})
	for sink, c := range soft.Sinks {
		add("sink "+sink, plan.Sinks[sink], c, run(closed, nil))
	}
	for i, payload := range [][]byte{[]byte("even"), []byte("odd"), {}} {
		add(fmt.Sprintf("udp send %d", i), plan.Send, soft.Send, run(closed, func(tx *dataplane.Tx) {
			tx.Payload = payload
			copy(tx.Src[:], us.To4())
			copy(tx.Dst[:], peer.To4())
			tx.SPort, tx.DPort = 53, 4000
			copy(tx.DstMAC[:], []byte{2, 0, 0, 0, 0, 1})
		}))
	}
	return out
}

func appendNew(s []string, xs ...string) []string {
	for _, x := range xs {
		if !slices.Contains(s, x) {
			s = append(s, x)
		}
	}
	return s
}

// checksumsOK recomputes a frame's checksums with gopacket and compares.
func checksumsOK(frame []byte) error {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil {
		if p.Layer(layers.LayerTypeARP) == nil {
			return fmt.Errorf("neither IPv4 nor ARP")
		}
		return nil
	}
	opts := gopacket.SerializeOptions{ComputeChecksums: true}
	check := func(l gopacket.SerializableLayer, sent uint16, off int, what string) error {
		buf := gopacket.NewSerializeBuffer()
		if err := l.SerializeTo(buf, opts); err != nil {
			return err
		}
		b := buf.Bytes()
		if got := uint16(b[off])<<8 | uint16(b[off+1]); got != sent {
			return fmt.Errorf("%s checksum %#04x, gopacket computes %#04x", what, sent, got)
		}
		return nil
	}
	sentIP := ip.Checksum
	if err := check(ip, sentIP, 10, "IPv4 header"); err != nil {
		return err
	}
	if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		sent := u.Checksum
		if sent == 0 {
			return fmt.Errorf("a UDP checksum of zero: none computed")
		}
		if err := u.SetNetworkLayerForChecksum(ip); err != nil {
			return err
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, opts, u, gopacket.Payload(u.Payload)); err != nil {
			return err
		}
		if b := buf.Bytes(); uint16(b[6])<<8|uint16(b[7]) != sent {
			return fmt.Errorf("UDP checksum %#04x, gopacket computes %#04x", sent, uint16(b[6])<<8|uint16(b[7]))
		}
	}
	if c, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		sent := c.Checksum
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, opts, c, gopacket.Payload(c.Payload)); err != nil {
			return err
		}
		if b := buf.Bytes(); uint16(b[2])<<8|uint16(b[3]) != sent {
			return fmt.Errorf("ICMP checksum %#04x, gopacket computes %#04x", sent, uint16(b[2])<<8|uint16(b[3]))
		}
	}
	return nil
}

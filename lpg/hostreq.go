package lpg

import (
	"slices"
	"strings"

	"github.com/dragonc/dragonc/internal/pred"
)

// Address facts of the host requirements (RFC 1122), computed once per
// stack and used by the derivation, the endpoint predicates and the
// overlap analysis.

// LimitedBroadcast is 255.255.255.255 (RFC 1122 §3.2.1.3 (c)).
const LimitedBroadcast uint32 = 0xFFFFFFFF

// Broadcast returns the directed broadcast address of the prefix's subnet
// ({<Network-number>, -1}, RFC 1122 §3.2.1.3 (d)). A /31 (RFC 3021) or /32
// has no host part to set, and so no directed broadcast.
func (p Prefix) Broadcast() (uint32, bool) {
	if p.Len > 30 {
		return 0, false
	}
	return p.Addr | (1<<uint(32-p.Len) - 1), true
}

// Contains reports whether address a lies in the prefix's subnet.
func (p Prefix) Contains(a uint32) bool {
	if p.Len <= 0 {
		return true
	}
	mask := ^uint32(0) << uint(32-p.Len)
	return a&mask == p.Addr&mask
}

// Unicast returns the host's own addresses, sorted.
func (st *Stack) Unicast() []uint32 {
	var out []uint32
	for _, in := range st.Interfaces {
		for _, p := range in.IPs {
			out = append(out, p.Addr)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Broadcasts returns the broadcast addresses the host must recognise as
// its own for UDP (RFC 1122 §3.3.6): the limited broadcast and the directed
// broadcast of each interface subnet, sorted.
func (st *Stack) Broadcasts() []uint32 {
	out := []uint32{LimitedBroadcast}
	for _, in := range st.Interfaces {
		for _, p := range in.IPs {
			if b, ok := p.Broadcast(); ok {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MaxFrame returns the largest frame (without FCS) an interface accepts:
// its MTU plus the 14-byte Ethernet header, and 4 more for an 802.1Q tag
// (IEEE 802.3 clause 3.2.7 and 802.1Q: 1518 and 1522 bytes with FCS at the
// default MTU of 1500).
func (in Interface) MaxFrame(tagged bool) int {
	n := in.MTU + 14
	if tagged {
		n += 4
	}
	return n
}

func ipSet(addrs []uint32) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = FormatIP(a)
	}
	return strings.Join(parts, ", ")
}

// mtuPredicate accepts frames that fit the MTU of the interface they are
// addressed to; a broadcast frame may be as large as the largest MTU.
func mtuPredicate(st *Stack) string {
	fits := func(in Interface) string {
		return "(frame.len <= " + itoa(in.MaxFrame(false)) + " || (vlan.id in {0..4095} && frame.len <= " + itoa(in.MaxFrame(true)) + "))"
	}
	same := true
	widest := Interface{MTU: 1500}
	for i, in := range st.Interfaces {
		if i == 0 || in.MTU > widest.MTU {
			widest = in
		}
		if in.MTU != st.Interfaces[0].MTU {
			same = false
		}
	}
	if same {
		return fits(widest)
	}
	var parts []string
	for _, in := range st.Interfaces {
		parts = append(parts, "(eth.dst == "+pred.FormatValue("eth.dst", in.MAC)+" && "+fits(in)+")")
	}
	parts = append(parts, "(eth.dst == ff:ff:ff:ff:ff:ff && "+fits(widest)+")")
	return strings.Join(parts, " || ")
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// martianPredicate holds for datagrams whose source address is valid for
// a datagram arriving on this (non-loopback) interface. RFC 1122 §3.2.1.3:
// a host MUST silently discard a datagram whose source address is invalid
// by that section's rules: the limited broadcast (c) and a directed
// broadcast (d) are never sources; 127/8 (g) never appears outside a host;
// {0, 0} and {0, Host-number} (a, b) are sources only while a host learns
// its address, which is what a datagram to the limited broadcast from
// 0.0.0.0 does (BOOTP/DHCP, RFC 2131 §4.1). A class D (multicast) address
// is never a source (RFC 1112 §4; RFC 1122 §3.2.2 lists it among sources
// that "do not define a single host"). A datagram claiming one of our own
// addresses as its source did not come from us over this wire: Linux's
// fib_validate_source rejects it as a martian too.
func martianPredicate(st *Stack) string {
	return "!(ip.src in {" + strings.Join(martians(st), ", ") + "}) && (!(ip.src in {0.0.0.0..0.255.255.255}) || ip.dst == 255.255.255.255)"
}

// martians are the addresses no host on the wire may claim as its own
// (martianPredicate): multicast, loopback, our broadcasts and our own
// addresses.
func martians(st *Stack) []string {
	bad := []string{"224.0.0.0..239.255.255.255", "127.0.0.0..127.255.255.255"}
	for _, a := range append(st.Broadcasts(), st.Unicast()...) {
		bad = append(bad, FormatIP(a))
	}
	return bad
}

// groupBit is the I/G bit of a MAC address (IEEE 802 §8.2): set, the
// address names a group (multicast or broadcast), never one station.
const groupBit = "01:00:00:00:00:00"

// Shadowed returns the listeners that can never receive a packet: every
// destination they could match is taken by more specific endpoints (the
// demultiplexer tries flows, then address-specific listeners, then
// wildcard listeners). Only a TCP listener on every address can be
// shadowed, by TCP listeners on the same port bound to each of our
// unicast addresses (a TCP listener never accepts a broadcast, RFC 1122
// §4.2.3.10). A UDP listener on every address never is: it alone takes
// the port's broadcasts (Dsts). Flows never cover a listener: they fix
// one peer.
func (st *Stack) Shadowed() []*Endpoint {
	covered := map[uint16]map[uint32]bool{}
	for _, e := range st.Endpoints {
		if e.Proto != TCP || e.Flow || e.AnyAddr {
			continue
		}
		if covered[e.Port] == nil {
			covered[e.Port] = map[uint32]bool{}
		}
		for _, a := range e.Dsts() {
			covered[e.Port][a] = true
		}
	}
	if len(covered) == 0 {
		return nil
	}
	var out []*Endpoint
	for _, e := range st.Endpoints {
		if e.Proto != TCP || e.Flow || !e.AnyAddr || covered[e.Port] == nil {
			continue
		}
		all := true
		for _, a := range st.Unicast() {
			if !covered[e.Port][a] {
				all = false
				break
			}
		}
		if all {
			out = append(out, e)
		}
	}
	return out
}

// Dsts returns the destination addresses an address-specific endpoint
// receives: its address alone. A broadcast goes to the listeners on every
// address only, as Linux delivers it (net/ipv4/udp.c,
// __udp_is_mcast_sock: a socket bound to an address takes datagrams to
// that address) and BSD does (udp_input's loop over the sockets for a
// broadcast or multicast datagram); RFC
// 1122 §3.3.6 requires that a host take broadcasts, not that every
// socket see them. Nil for wildcard and Open-MX endpoints.
func (e *Endpoint) Dsts() []uint32 {
	if e.AnyAddr || e.Proto == OpenMX {
		return nil
	}
	return []uint32{e.Addr}
}

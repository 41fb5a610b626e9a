package sovialat

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// PeerMAC finds the Ethernet address of host on interface ifname, which
// the software VI addresses its peer by: host is a MAC itself
// (02:00:00:00:00:01), or an IPv4 address or name whose neighbour entry
// on ifname gives it. With no entry yet, an empty UDP datagram to the
// host's discard port (RFC 863) makes the kernel ask with ARP, and the
// table is read again for up to a second.
func PeerMAC(ctx context.Context, ifname, host string) (net.HardwareAddr, error) {
	if mac, err := net.ParseMAC(host); err == nil {
		if len(mac) != 6 {
			return nil, fmt.Errorf("%s is not an Ethernet address", host)
		}
		return mac, nil
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("no interface %s", ifname)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
		if lerr != nil || len(ips) == 0 {
			return nil, fmt.Errorf("%s is neither an Ethernet address nor a host with an IPv4 address: %v", host, lerr)
		}
		ip = ips[0]
	}
	ip = ip.Unmap()
	if !ip.Is4() {
		return nil, fmt.Errorf("%s: the peer is found through ARP, which is IPv4's", host)
	}
	asked := false
	deadline := time.Now().Add(time.Second)
	for {
		b, err := syscall.NetlinkRIB(syscall.RTM_GETNEIGH, syscall.AF_INET)
		if err != nil {
			return nil, fmt.Errorf("reading the neighbour table: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(b)
		if err != nil {
			return nil, fmt.Errorf("reading the neighbour table: %w", err)
		}
		if mac := neighbour(msgs, ifc.Index, ip); mac != nil {
			return mac, nil
		}
		if !asked {
			asked = true
			if c, err := net.Dial("udp4", netip.AddrPortFrom(ip, 9).String()); err == nil {
				c.Write(nil)
				c.Close()
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has no neighbour entry on %s and did not answer ARP (give its Ethernet address instead: [02:00:00:00:00:01]:PORT)", ip, ifname)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Netlink's neighbour messages (include/uapi/linux/neighbour.h): struct
// ndmsg (family, two pad fields, ifindex, state, flags, type) and route
// attributes NDA_DST and NDA_LLADDR; the states of an entry that holds no
// address.
const (
	ndmsgLen      = 12
	ndaDst        = 1
	ndaLLAddr     = 2
	nudIncomplete = 0x01
	nudFailed     = 0x20
)

// neighbour is the link-layer address of ip on interface ifindex in a
// dump of the neighbour table; nil when it has none.
func neighbour(msgs []syscall.NetlinkMessage, ifindex int, ip netip.Addr) net.HardwareAddr {
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWNEIGH || len(m.Data) < ndmsgLen {
			continue
		}
		idx := int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))
		state := binary.NativeEndian.Uint16(m.Data[8:10])
		if idx != ifindex || state&(nudIncomplete|nudFailed) != 0 {
			continue
		}
		var dst netip.Addr
		var ll net.HardwareAddr
		for a := m.Data[ndmsgLen:]; len(a) >= 4; {
			n := int(binary.NativeEndian.Uint16(a[0:2]))
			if n < 4 || n > len(a) {
				break
			}
			switch binary.NativeEndian.Uint16(a[2:4]) {
			case ndaDst:
				dst, _ = netip.AddrFromSlice(a[4:n])
			case ndaLLAddr:
				ll = net.HardwareAddr(append([]byte(nil), a[4:n]...))
			}
			a = a[min(len(a), (n+3)&^3):]
		}
		if dst.Unmap() == ip && len(ll) == 6 {
			return ll
		}
	}
	return nil
}

package sovia

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Addr is a SOVIA endpoint's address, for Go's net interfaces: the
// Ethernet address of the host and a port. A dialer has no port of its
// own: its address, and the RemoteAddr of the connection a listener
// accepted from it, have port 0.
type Addr struct {
	MAC  net.HardwareAddr
	Port uint16
}

var _ net.Addr = Addr{}

// Network is "sovia".
func (a Addr) Network() string { return "sovia" }

// String writes the address as "[MAC]:PORT", the form net.JoinHostPort
// gives a host with colons; ParseAddr reads it back.
func (a Addr) String() string {
	return net.JoinHostPort(a.MAC.String(), strconv.Itoa(int(a.Port)))
}

// ParseAddr reads "[MAC]:PORT" or "MAC:PORT" (the port after the MAC's
// five colons), MAC in any form net.ParseMAC reads of 6 bytes.
func ParseAddr(s string) (Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// "02:00:00:00:00:0b:5000": the port follows the last colon.
		i := strings.LastIndexByte(s, ':')
		if i < 0 || strings.Contains(s, "[") {
			return Addr{}, fmt.Errorf("sovia: address %q: want MAC:PORT or [MAC]:PORT", s)
		}
		host, port = s[:i], s[i+1:]
	}
	mac, err := net.ParseMAC(host)
	if err != nil || len(mac) != 6 {
		return Addr{}, fmt.Errorf("sovia: address %q: %q is not a 6-byte Ethernet address", s, host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return Addr{}, fmt.Errorf("sovia: address %q: port %q is not a number in 0..65535", s, port)
	}
	return Addr{MAC: mac, Port: uint16(n)}, nil
}

// connAddrs are a connection's ends, set by connection setup; a
// connection made over a VI by NewConn or NewPair has zero ones.
type connAddrs struct{ local, remote Addr }

// LocalAddr is this end's address (net.Conn's).
func (c *Conn) LocalAddr() net.Addr { return c.addrs.local }

// RemoteAddr is the peer's address (net.Conn's).
func (c *Conn) RemoteAddr() net.Addr { return c.addrs.remote }

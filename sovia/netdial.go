//go:build linux

package sovia

import (
	"context"
	"net"
)

// *Conn is a net.Conn and the raw listener a net.Listener.
var (
	_ net.Conn     = (*Conn)(nil)
	_ net.Listener = (*RawListener)(nil)
)

// Addr is the address the listener takes connections on: the host's
// Ethernet address and the port (net.Listener's).
func (l *RawListener) Addr() net.Addr { return Addr{MAC: l.h.MAC(), Port: l.port} }

// Dial connects to addr from interface ifname, on a host of its own (a
// raw socket; it needs CAP_NET_RAW), asking again until the listener
// answers or ctx is done. The host closes with the connection's VI, once
// the close exchange after Close ends.
func Dial(ctx context.Context, ifname string, addr Addr, p Params) (*Conn, error) {
	h, err := OpenHost(ifname)
	if err != nil {
		return nil, err
	}
	c, err := h.DialContext(ctx, addr.MAC, addr.Port, p)
	if err != nil {
		h.Close()
		return nil, err
	}
	h.mu.Lock()
	h.setup.owner = c.vi.(*RawVI).lvi
	h.mu.Unlock()
	return c, nil
}

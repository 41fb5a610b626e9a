package baseline

import (
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
)

// FromStack is what the baselines need to know of a stack. (This file
// stays in dragonc; the harness of `dragonc bench` gets the Config as a
// literal.)
func FromStack(st *lpg.Stack) Config {
	var c Config
	for _, in := range st.Interfaces {
		c.Interfaces = append(c.Interfaces, Interface{MAC: in.MAC, MaxFrame: in.MaxFrame(false)})
	}
	c.Unicast = st.Unicast()
	c.Broadcasts = st.Broadcasts()
	for _, e := range st.Endpoints {
		ep := Endpoint{Flow: e.Flow, AnyAddr: e.AnyAddr, Dsts: e.Dsts(), Port: e.Port, Remote: e.Remote, RPort: e.RPort, OMXID: e.OMXID}
		switch e.Proto {
		case lpg.UDP:
			ep.Proto = UDP
		case lpg.TCP:
			ep.Proto = TCP
		case lpg.OpenMX:
			ep.Proto = OpenMX
		}
		if e.Flow && !e.AnyAddr {
			ep.Dsts = []uint32{e.Addr} // a connected flow is unicast
		}
		c.Endpoints = append(c.Endpoints, ep)
	}
	return c
}

// Checksums are the verdicts a checksum-offloading NIC reports with a
// frame, computed in software: the IPv4 header checksum, and the UDP or
// TCP checksum (false when the frame carries neither).
func Checksums(b []byte) (ipOK, l4OK bool) {
	var f packet.Frame
	f.Decode(b)
	v, _ := f.Field("ip.csum_ok")
	ipOK = v == 1
	for _, name := range []string{"udp.csum_ok", "tcp.csum_ok"} {
		if v, ok := f.Field(name); ok {
			l4OK = v == 1
		}
	}
	return ipOK, l4OK
}

package dataplane

import (
	"fmt"
	"net"
)

// EtherTypeVIA is the EtherType of the software VI's frames (package
// sovia). The eBPF stage leaves them to the kernel, which hands them to
// the VIs' own packet socket (Stack.OpenVIs): a VIA provider sits beside
// the IP stack, as M-VIA's kernel module does, and the generated code has
// no node for them.
const EtherTypeVIA = 0x88B5

// VIs are the software VIs served beside the stack: package sovia's host
// on a packet socket of its own, bound to EtherType 0x88B5 on the
// interface (sovia.OpenHostAs). The goroutines that wait on its VIs read
// that socket themselves, as the SOVIA paper's single-threaded design
// does (docs/sovia.md); the receive loops never see a VI frame, and the
// VIs' sends do not go through the loops' sockets. The data plane only
// reports their counters and closes them when it stops.
type VIs struct {
	// Link reads the counters of the VIs' socket (sovia's
	// RawHost.LinkCounts, converted: the fields are the same).
	Link func() VILink
	// SetupDrops calls each with every reason the VIs' connection setup
	// dropped frames or connections for, and how many (sovia's
	// RawHost.EachSetupCount).
	SetupDrops func(each func(reason string, count uint64))
	// Close stops the VIs and closes their socket.
	Close func() error
}

// VILink are the counters of the VIs' socket, as sovia.LinkCounts has
// them.
type VILink struct {
	Received   uint64 `json:"received"`              // frames the socket took
	Sent       uint64 `json:"sent"`                  // frames sent
	SendErrors uint64 `json:"send_errors,omitempty"` // frames the socket refused
	Dropped    uint64 `json:"dropped,omitempty"`     // frames the kernel had no room for (PACKET_STATISTICS)
	Oversize   uint64 `json:"oversize,omitempty"`    // frames longer than a slot of the receive ring (the MTU) that could not be read whole, dropped
	NoRoom     uint64 `json:"no_room,omitempty"`     // bulk datagrams the socket had no room to queue whole (its buffer full), dropped
	// Bulk datagrams (package sovia): sent, each counted in Sent as the
	// frames the link cuts it into; received whole, each one frame in
	// Received; refused by the kernel (their messages went as frames).
	BulkSent     uint64 `json:"bulk_sent,omitempty"`
	BulkReceived uint64 `json:"bulk_received,omitempty"`
	BulkRefused  uint64 `json:"bulk_refused,omitempty"`
	// VIs that gave bulk datagrams up, none acknowledged (frames since).
	BulkAbandoned uint64 `json:"bulk_abandoned,omitempty"`
}

// openVIs opens the stack's VIs on the interface (Stack.OpenVIs); nil
// when the stack has none.
func openVIs(st *Stack, cfg Config) (*VIs, error) {
	if st.OpenVIs == nil {
		return nil, nil
	}
	ifc, err := net.InterfaceByIndex(cfg.Ifindex)
	if err != nil {
		return nil, fmt.Errorf("the software VIs: %w", err)
	}
	v, err := st.OpenVIs(ifc.Name, cfg.VISpin())
	if err != nil {
		return nil, fmt.Errorf("the software VIs on %s: %w", ifc.Name, err)
	}
	if v.Link == nil || v.SetupDrops == nil || v.Close == nil {
		if v.Close != nil {
			v.Close()
		}
		return nil, fmt.Errorf("the software VIs on %s: OpenVIs returned no counters or no Close", ifc.Name)
	}
	return &v, nil
}

// counts reads the VIs' counters for a report.
func (v *VIs) counts() *VICounts {
	c := &VICounts{VILink: v.Link(), SetupDrops: []Outcome{}}
	v.SetupDrops(func(reason string, n uint64) { c.SetupDrops = append(c.SetupDrops, Outcome{reason, n}) })
	return c
}

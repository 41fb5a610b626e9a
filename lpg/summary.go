package lpg

import (
	"fmt"
	"strings"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// Summary describes a stack and its LPG in text, for `dragonc lpg`.
func Summary(st *Stack, g *graph.Graph) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack %s: LPG with %d nodes, %d edges, %d spawn edges\n", st.Name, len(g.Nodes), len(g.Edges()), g.SpawnEdges())
	for _, in := range st.Interfaces {
		var ips []string
		for _, p := range in.IPs {
			ips = append(ips, fmt.Sprintf("%s/%d", FormatIP(p.Addr), p.Len))
		}
		fmt.Fprintf(&b, "interface %s: mac %s, ip %s, mtu %d\n", in.Name, pred.FormatValue("eth.dst", in.MAC), strings.Join(ips, " "), in.MTU)
	}
	if st.Cores != nil {
		fmt.Fprintf(&b, "cores: %s\n", FormatCores(st.Cores))
	}
	var services []string
	if st.ARP {
		services = append(services, "arp")
	}
	if st.ICMPEcho {
		services = append(services, "icmp-echo")
	}
	if len(services) > 0 {
		fmt.Fprintf(&b, "services: %s\n", strings.Join(services, ", "))
	}
	fmt.Fprintf(&b, "icmp-errors: %s", st.ICMPErrors)
	if st.ICMPErrors == LinuxICMPErrors {
		b.WriteString(" (Linux's defaults)")
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "endpoints: %d\n", len(st.Endpoints))
	for _, e := range st.Endpoints {
		fmt.Fprintf(&b, "    %-14s %s", e.Name, e.Describe())
		if e.App != "" {
			fmt.Fprintf(&b, "  app %q", e.App)
		}
		if e.Class == Gold {
			b.WriteString("  class gold")
		}
		if e.Rate > 0 {
			fmt.Fprintf(&b, "  rate %s", FormatRate(e.Rate))
		}
		if e.Cores != nil {
			fmt.Fprintf(&b, "  cores %s", FormatCores(e.Cores))
		}
		if e.Message > 0 {
			fmt.Fprintf(&b, "  message %dB", e.Message)
		}
		if e.NoDelay {
			b.WriteString("  nodelay")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Describe says what an endpoint receives, in stack-file syntax.
func (e *Endpoint) Describe() string {
	local := "*"
	if !e.AnyAddr {
		local = FormatIP(e.Addr)
	}
	switch {
	case e.Proto == OpenMX:
		return fmt.Sprintf("openmx %d", e.OMXID)
	case e.Flow:
		return fmt.Sprintf("%s flow %s:%d -> %s:%d", e.Proto, local, e.Port, FormatIP(e.Remote), e.RPort)
	}
	return fmt.Sprintf("%s listen %s:%d", e.Proto, local, e.Port)
}

// String prints the limit in stack-file syntax: rate 1kpps burst 50
// peer-rate 1pps peer-burst 6.
func (l ICMPErrorLimit) String() string {
	return fmt.Sprintf("rate %s burst %d peer-rate %s peer-burst %d", FormatRate(float64(l.Rate)), l.Burst, FormatRate(l.PeerRate), l.PeerBurst)
}

// FormatCores prints a sorted core list compactly: 0..3,6.
func FormatCores(cs []int) string {
	var parts []string
	for i := 0; i < len(cs); {
		j := i
		for j+1 < len(cs) && cs[j+1] == cs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d..%d", cs[i], cs[j]))
		} else {
			parts = append(parts, fmt.Sprint(cs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// FormatRate prints a packet rate with the largest unit that keeps it
// readable: 300kpps, 1.2Mpps.
func FormatRate(pps float64) string {
	switch {
	case pps >= 1e6:
		return fmt.Sprintf("%gMpps", pps/1e6)
	case pps >= 1e3:
		return fmt.Sprintf("%gkpps", pps/1e3)
	}
	return fmt.Sprintf("%gpps", pps)
}

// StackSummary is the summary of `dragonc lpg --json`.
type StackSummary struct {
	Stack      string             `json:"stack"`
	Nodes      int                `json:"nodes"`
	Edges      int                `json:"edges"`
	SpawnEdges int                `json:"spawn_edges"`
	Interfaces []InterfaceSummary `json:"interfaces"`
	Cores      []int              `json:"cores"`
	Services   []string           `json:"services"`
	ICMPErrors ICMPErrorsSummary  `json:"icmp_errors"`
	Endpoints  []EndpointSummary  `json:"endpoints"`
}

// ICMPErrorsSummary is the stack's limit on ICMP errors (ICMPErrorLimit).
type ICMPErrorsSummary struct {
	Rate      int     `json:"rate_pps"`
	Burst     int     `json:"burst"`
	PeerRate  float64 `json:"peer_rate_pps"`
	PeerBurst int     `json:"peer_burst"`
}

// InterfaceSummary describes one interface.
type InterfaceSummary struct {
	Name string   `json:"name"`
	MAC  string   `json:"mac"`
	IPs  []string `json:"ips"`
	MTU  int      `json:"mtu"`
}

// EndpointSummary describes one endpoint.
type EndpointSummary struct {
	Name     string  `json:"name"`
	Receives string  `json:"receives"` // in stack-file syntax
	App      string  `json:"app,omitempty"`
	Class    string  `json:"class"`
	Rate     float64 `json:"rate_pps,omitempty"`
	Cores    []int   `json:"cores,omitempty"`
	Message  int     `json:"message_bytes,omitempty"`
	NoDelay  bool    `json:"nodelay,omitempty"`
	Shadowed bool    `json:"shadowed,omitempty"`
}

// SummaryOf is Summary as data.
func SummaryOf(st *Stack, g *graph.Graph) StackSummary {
	s := StackSummary{Stack: st.Name, Nodes: len(g.Nodes), Edges: len(g.Edges()), SpawnEdges: g.SpawnEdges(),
		Interfaces: []InterfaceSummary{}, Cores: st.Cores, Services: []string{}, Endpoints: []EndpointSummary{},
		ICMPErrors: ICMPErrorsSummary(st.ICMPErrors)}
	if s.Cores == nil {
		s.Cores = []int{}
	}
	for _, in := range st.Interfaces {
		is := InterfaceSummary{Name: in.Name, MAC: pred.FormatValue("eth.dst", in.MAC), IPs: []string{}, MTU: in.MTU}
		for _, p := range in.IPs {
			is.IPs = append(is.IPs, fmt.Sprintf("%s/%d", FormatIP(p.Addr), p.Len))
		}
		s.Interfaces = append(s.Interfaces, is)
	}
	if st.ARP {
		s.Services = append(s.Services, "arp")
	}
	if st.ICMPEcho {
		s.Services = append(s.Services, "icmp-echo")
	}
	for _, e := range st.Endpoints {
		s.Endpoints = append(s.Endpoints, EndpointSummary{Name: e.Name, Receives: e.Describe(), App: e.App, Class: string(e.Class),
			Rate: e.Rate, Cores: e.Cores, Message: e.Message, NoDelay: e.NoDelay, Shadowed: e.Shadowed})
	}
	return s
}

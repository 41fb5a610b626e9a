// Package streams decides how each stream endpoint of a stack travels on a
// NIC with Virtual Interfaces (VIA): over a VI of its own with the SOVIA
// protocol (package sovia), or through kernel TCP; and, for a VI, how SOVIA
// sends — the copy-or-register threshold chosen from the provider's
// measured latencies rather than the paper's fixed 2 KB, the window, the
// delayed-acknowledgement threshold, combining and the chunk size.
//
// The provider's facts come from the NIC model: an engine of kind "via"
// (nics/clan1000.prg, nics/mvia.prg; docs/sovia.md lists its properties).
package streams

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/sovia"
)

// Provider is a VIA provider as a model's engine of kind "via" describes it.
type Provider struct {
	Engine      string // the engine's name in the model
	Name        string // the provider, as the model names it
	VIs         int    // VIs a connection may take
	MaxTransfer int    // the largest message one descriptor carries (bytes)
	ZeroCopy    bool   // the adapter reads registered user memory itself
	// TCPLatency is kernel TCP's one-way latency of a 4-byte message on
	// the same machines (µs); VIAMbps and TCPMbps the peak bandwidths of
	// VIA and of TCP, which scale the size-dependent part of TCP's latency
	// (TCPLatencyAt).
	TCPLatency       float64
	VIAMbps, TCPMbps float64
	Rows             []Latency // by size, ascending
	// CopyMax is the copy threshold chosen from Rows (CopyThreshold), or
	// the calibration's.
	CopyMax int
	// Calibration, if set, is the provider as measured beside kernel TCP
	// (Calibrated): it decides, not Rows.
	Calibration *Calibration
}

// ProviderOf reads the VIA provider of a model: nil when the model has no
// engine of kind "via".
func ProviderOf(m *prg.Model) (*Provider, error) {
	engs := m.Engines(prg.EngineVIA)
	switch {
	case len(engs) == 0:
		return nil, nil
	case len(engs) > 1:
		return nil, fmt.Errorf("model %s has two VIA engines, %s and %s", m.Name, engs[0].Name, engs[1].Name)
	}
	eng := engs[0]
	bad := func(format string, args ...any) (*Provider, error) {
		return nil, fmt.Errorf("model %s, engine %s: %s", m.Name, eng.Name, fmt.Sprintf(format, args...))
	}
	num := func(key string, lo, hi float64) (float64, error) {
		v, ok := eng.Props[key]
		if !ok {
			return 0, fmt.Errorf("property %s is missing", key)
		}
		n := scaled(v)
		if len(v.List) > 0 || v.Str != "" || math.IsNaN(n) || n < lo || n > hi {
			return 0, fmt.Errorf("property %s must be a number in %g..%g", key, lo, hi)
		}
		return n, nil
	}
	p := &Provider{Engine: eng.Name, Name: eng.Props["provider"].Str}
	var vals [6]float64
	for i, k := range []string{"vis", "max_transfer", "zero_copy", "tcp_latency", "via_mbps", "tcp_mbps"} {
		hi := 1e9
		if k == "zero_copy" {
			hi = 1
		}
		n, err := num(k, 0, hi)
		if err != nil {
			return bad("%v", err)
		}
		vals[i] = n
	}
	p.VIs, p.MaxTransfer, p.ZeroCopy = int(vals[0]), int(vals[1]), vals[2] == 1
	p.TCPLatency, p.VIAMbps, p.TCPMbps = vals[3], vals[4], vals[5]
	if p.VIs < 1 || p.MaxTransfer < 1 || p.VIAMbps <= 0 || p.TCPMbps <= 0 {
		return bad("vis, max_transfer, via_mbps and tcp_mbps must be above 0")
	}
	rows := eng.Props["latency"].List
	if len(rows) == 0 {
		return bad("property latency is missing: a list of [SIZE native reg copy hybrid] rows")
	}
	for i, r := range rows {
		if len(r.List) != 5 {
			return bad("latency row %d has %d values; want [SIZE native reg copy hybrid]", i+1, len(r.List))
		}
		size := scaled(r.List[0])
		var us [4]float64
		for j := range us {
			us[j] = r.List[j+1].Num
			if !(us[j] > 0) || us[j] > 1e9 {
				return bad("latency row %d: %g is not a latency in µs", i+1, us[j])
			}
		}
		if !(size >= 1) || size > 1<<30 || size != math.Trunc(size) {
			return bad("latency row %d: size %g is not a whole number of bytes", i+1, size)
		}
		if i > 0 && int(size) <= p.Rows[i-1].Size {
			return bad("latency row %d: sizes must grow", i+1)
		}
		p.Rows = append(p.Rows, Latency{Size: int(size), Native: us[0], Reg: us[1], Copy: us[2], Hybrid: us[3]})
	}
	p.CopyMax = CopyThreshold(p.Rows)
	return p, nil
}

// scaled is a number with its byte unit applied (dsl.Units).
func scaled(v graph.Value) float64 {
	if scale, ok := dsl.Scale(v.Unit, dsl.Size); ok {
		return v.Num * scale
	}
	return v.Num
}

// at interpolates a column of the table at size bytes: linearly between
// rows, flat below the first, and linearly by bytes beyond the last
// (longer messages are cut into chunks that follow each other).
func (p *Provider) at(size int, col func(Latency) float64) float64 {
	r := p.Rows
	i := sort.Search(len(r), func(i int) bool { return r[i].Size >= size })
	switch {
	case i < len(r) && r[i].Size == size, i == 0:
		return col(r[i])
	case i == len(r):
		if len(r) == 1 {
			return col(r[0]) * float64(size) / float64(r[0].Size)
		}
		a, b := r[len(r)-2], r[len(r)-1]
		slope := (col(b) - col(a)) / float64(b.Size-a.Size)
		return col(b) + slope*float64(size-b.Size)
	}
	a, b := r[i-1], r[i]
	f := float64(size-a.Size) / float64(b.Size-a.Size)
	return col(a) + f*(col(b)-col(a))
}

// SOVIALatencyAt predicts SOVIA's one-way latency of a size-byte message
// with copy threshold copyMax: the COPY column up to it, REG above.
func (p *Provider) SOVIALatencyAt(size, copyMax int) float64 {
	if size <= copyMax {
		return p.at(size, func(l Latency) float64 { return l.Copy })
	}
	return p.at(size, func(l Latency) float64 { return l.Reg })
}

// TCPLatencyAt estimates kernel TCP's one-way latency of a size-byte
// message. The paper measured TCP's latency for 4 bytes only; the rest
// of a message's latency grows with its size as it does over native VIA,
// with each byte costing more by the ratio of the two peak bandwidths:
// TCP(4) + (native(size) - native(4)) x VIA Mb/s / TCP Mb/s.
func (p *Provider) TCPLatencyAt(size int) float64 {
	native := func(l Latency) float64 { return l.Native }
	grow := max(0, p.at(size, native)-p.at(p.Rows[0].Size, native))
	return p.TCPLatency + grow*p.VIAMbps/p.TCPMbps
}

// Params are the SOVIA settings on this provider: the paper's window
// (w = 32), acknowledgement threshold (t = 16), combining (under 2 KB, for
// up to 100 ms), 32 KB chunks no longer than the provider's largest
// transfer, and the copy threshold chosen from the latency table.
func (p *Provider) Params(noDelay bool) sovia.Params {
	s := sovia.PaperParams()
	s.ChunkSize = min(s.ChunkSize, p.MaxTransfer)
	s.CombineMax = min(s.CombineMax, s.ChunkSize)
	s.CopyMax = p.CopyMax
	if noDelay {
		s.NoDelay, s.CombineMax, s.CombineDelay = true, 0, 0
	}
	return s
}

// Choice is how one stream endpoint travels.
type Choice struct {
	Endpoint  string
	Local     netip.AddrPort
	Remote    netip.AddrPort // the zero value for a listener
	Transport string         // "vi" or "tcp"
	Reason    string
	VI        int          // the VI (transport vi), from 1
	Params    sovia.Params // transport vi
	// Size is the message size the latencies are predicted for: the
	// endpoint's `message`, or 4 bytes, the paper's "latency" (§3.2).
	Size           int
	SOVIAus, TCPus float64
	// SOVIAp99 and TCPp99 are the 99th percentiles a calibration
	// measured; 0 from a model's table.
	SOVIAp99, TCPp99 float64
	// Carrier names what carries the stream: the VIA provider, or kernel
	// TCP.
	Carrier string
}

// Decide chooses, for every TCP endpoint of a stack, a VI or kernel TCP,
// in the stack's order. A VI carries a connection between two hosts of the
// VI network, so only connected flows whose peer lies on a subnet of the
// stack's interfaces are candidates (VIA is a system-area network with no
// routing; a listener also accepts hosts from beyond it). A candidate gets
// a VI when SOVIA's predicted latency at its message size is below TCP's
// and a VI is left; VIs go to gold endpoints first, then to higher rates,
// then in the stack's order.
func Decide(p *Provider, st *lpg.Stack) []Choice {
	var out []Choice
	type cand struct {
		i int // in out
		e *lpg.Endpoint
	}
	var cands []cand
	for _, e := range st.Endpoints {
		if e.Proto != lpg.TCP {
			continue
		}
		c := Choice{Endpoint: e.Name, Transport: "tcp", Size: e.Message}
		if c.Size <= 0 {
			c.Size = 4
		}
		c.Local = netip.AddrPortFrom(pred.Addr(e.Addr), e.Port)
		if e.AnyAddr {
			c.Local = netip.AddrPortFrom(netip.IPv4Unspecified(), e.Port)
		}
		params := p.Params(e.NoDelay)
		var faster bool
		if p.Calibration != nil {
			faster = p.calibratedChoice(&c)
		} else {
			c.SOVIAus, c.TCPus = round(p.SOVIALatencyAt(c.Size, params.CopyMax)), round(p.TCPLatencyAt(c.Size))
			faster = c.SOVIAus < c.TCPus
			c.Reason = fmt.Sprintf("%d B messages: SOVIA %.1f us against TCP's %.1f us", c.Size, c.SOVIAus, c.TCPus)
			if !faster {
				c.Reason = fmt.Sprintf("%d B messages: SOVIA %.1f us is not below TCP's %.1f us", c.Size, c.SOVIAus, c.TCPus)
			}
		}
		c.Carrier = "kernel TCP"
		switch {
		case !e.Flow:
			c.Reason = "a listener: hosts beyond the VI network reach it only by TCP"
		case !onLink(st, e.Remote):
			c.Reason = fmt.Sprintf("the peer %s is not on a subnet of the stack's interfaces: VIA does not route", pred.Addr(e.Remote))
		case faster:
			c.Params = params
			cands = append(cands, cand{len(out), e})
		}
		if e.Flow {
			c.Remote = netip.AddrPortFrom(pred.Addr(e.Remote), e.RPort)
		}
		out = append(out, c)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].e, cands[j].e
		if (a.Class == lpg.Gold) != (b.Class == lpg.Gold) {
			return a.Class == lpg.Gold
		}
		return a.Rate > b.Rate
	})
	for n, cd := range cands {
		c := &out[cd.i]
		if n >= p.VIs {
			c.Params = sovia.Params{}
			c.Reason = fmt.Sprintf("no VI left: %s has %d, taken by endpoints ahead of it (gold first, then rate)", p.label(), p.VIs)
			continue
		}
		c.Transport, c.VI, c.Carrier = "vi", n+1, p.label()
	}
	return out
}

func (p *Provider) label() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Engine
}

// Row is one size of the predicted-latency table of a provider.
type Row struct {
	Size              int
	Native, Predicted float64
	Hybrid            float64 // the paper's measured SOVIA_HYBRID
	TCP               float64 // TCPLatencyAt
	Copy              bool    // the chosen policy copies at this size
}

// Table predicts SOVIA's latency at every size of the provider's table
// under the chosen copy threshold, beside the measured HYBRID column.
func (p *Provider) Table() (copyMax int, rows []Row) {
	copyMax = p.CopyMax
	predicted := Predict(p.Rows, copyMax)
	for i, r := range p.Rows {
		rows = append(rows, Row{Size: r.Size, Native: r.Native, Predicted: predicted[i], Hybrid: r.Hybrid, TCP: round(p.TCPLatencyAt(r.Size)), Copy: r.Size <= copyMax})
	}
	return copyMax, rows
}

func onLink(st *lpg.Stack, a uint32) bool {
	for _, ifc := range st.Interfaces {
		if slices.ContainsFunc(ifc.IPs, func(p lpg.Prefix) bool { return p.Contains(a) }) {
			return true
		}
	}
	return false
}

func round(x float64) float64 { return math.Round(x*10) / 10 }

package run

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/run/dataplane"
)

// The XDP program's checks: the LPG nodes the embedder placed on the
// eBPF stage (prg/program.go), generated from the plan. The program first
// reads the fields of the predicate vocabulary out of the frame as
// internal/packet's decoder does (the same rules for headers that are
// cut short or absent), then runs each placed node's port predicates in
// order: a port that leads to another placed node goes on there, one
// that drops counts the drop site in a per-CPU array and ends with
// XDP_DROP, and one that leaves the stage hands the frame to the
// steering (which redirects the stack's frames to their receive loop and
// passes the rest to the kernel).

// StageDrop is where the stage drops: an LPG node and its port.
type StageDrop struct{ Node, Port string }

func (d StageDrop) String() string { return DropSite(d.Node, d.Port) }

// Stack slots of the checks (below the classifier's, which end at -120).
const (
	sgEth   = -136 // 16 bytes: the Ethernet header
	sgHdr   = -200 // 64 bytes: the IPv4 header with options, or the ARP body
	sgL4    = -208 // 8 bytes: a VLAN tag, or the ICMP or UDP header
	sgLen   = -216 // the frame's length
	sgIPLen = -224 // the bytes from the IPv4 header on
	sgKey   = -228 // the drop site's index, a map key
	sgField = -232 // the first field slot; field i is at sgField - 8*i
	// The answers use the classifier's slots: the stage ends (exit, or a
	// jump to the classifier, which writes its slots before it reads
	// them) before the classifier starts.
	sgOut    = -112 // 48 bytes: an answer's headers being built
	sgSum    = -56  // the IPv4 datagram's sum of 16-bit words (RFC 1071), unfolded; then the ICMP message's
	sgSummed = -48  // 1 when sgSum holds the datagram's sum (icmpPreSum)
	sgHdrSum = -40  // the IPv4 header's sum, unfolded
	arpLen   = 14 + 28
	// The longest ICMP datagram the stage sums: 1500 bytes (IEEE 802.3
	// clause 3.2.7), the model's guard (nics/linux-xdp.prg).
	sumMax = 1500
	// An echo reply's headers: Ethernet and IPv4 without options
	// (run/dataplane's l4At), then the ICMP type, code and checksum.
	echoHdr = 14 + 20
)

// Presence bits of the field groups, as internal/fallback's decoder.
const (
	hasFrame = 1 << iota
	hasEth
	hasVlan
	hasEthType
	hasArp
	hasIP
	hasICMP
	hasUDP
)

// stageFields are the fields the checks can read, with the header that
// carries them; a placed node that reads another field cannot be
// generated (l4.* would need TCP's header, which the stage does not read).
var stageFields = []struct {
	name string
	has  int32
}{
	{"frame.len", hasFrame}, {"frame.crc_ok", hasFrame},
	{"eth.dst", hasEth}, {"eth.src", hasEth}, {"eth.len_ok", hasEth},
	{"vlan.id", hasVlan}, {"eth.type", hasEthType},
	{"arp.op", hasArp}, {"arp.sha", hasArp}, {"arp.spa", hasArp}, {"arp.tpa", hasArp}, {"arp.valid", hasArp},
	{"ip.version", hasIP}, {"ip.ihl", hasIP}, {"ip.len", hasIP}, {"ip.ttl", hasIP}, {"ip.frag", hasIP}, {"ip.proto", hasIP},
	{"ip.src", hasIP}, {"ip.dst", hasIP}, {"ip.options", hasIP}, {"ip.hdr_ok", hasIP}, {"ip.csum_ok", hasIP}, {"ip.len_ok", hasIP},
	{"icmp.type", hasICMP}, {"icmp.code", hasICMP}, {"icmp.csum_ok", hasICMP},
	{"udp.sport", hasUDP}, {"udp.dport", hasUDP}, {"udp.len", hasUDP}, {"udp.len_ok", hasUDP},
}

func fieldSlot(name string) (int16, int32, bool) {
	i := slices.IndexFunc(stageFields, func(f struct {
		name string
		has  int32
	}) bool {
		return f.name == name
	})
	if i < 0 {
		return 0, 0, false
	}
	return int16(sgField - 8*i), stageFields[i].has, true
}

// checkProgram verifies that the generator can emit every predicate and
// answer of the placed nodes, and lists the drop sites and the answering
// nodes in program order.
func checkProgram(nodes []prg.StageNode) (sites []StageDrop, answers []string, err error) {
	var bad error
	var walk func(e pred.Expr)
	walk = func(e pred.Expr) {
		switch e := e.(type) {
		case pred.And:
			for _, x := range e.X {
				walk(x)
			}
		case pred.Or:
			for _, x := range e.X {
				walk(x)
			}
		case pred.Not:
			walk(e.X)
		case pred.Cmp:
			if _, _, ok := fieldSlot(e.Field); !ok && bad == nil {
				bad = fmt.Errorf("the eBPF stage does not read %s", e.Field)
			}
		case pred.Const, nil:
		default:
			if bad == nil {
				bad = fmt.Errorf("the eBPF stage cannot test %s", e)
			}
		}
	}
	for _, n := range nodes {
		if len(n.Ports) == 0 {
			if r := replyOf(n); r != "arp" && r != "icmp-echo" {
				return nil, nil, fmt.Errorf("%s: the eBPF stage cannot build its answer (%v)", n.Name, n.Answer)
			}
			answers = append(answers, n.Name)
		}
		for _, p := range n.Ports {
			walk(p.Pred)
			if p.Drops() {
				sites = append(sites, StageDrop{n.Name, p.Name})
			}
		}
		if bad != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.Name, bad)
		}
	}
	return sites, answers, nil
}

// replyOf is the reply an answering node sends (its lpg.AttrReply).
func replyOf(n prg.StageNode) string {
	for _, a := range n.Answer {
		if r, ok := strings.CutPrefix(a, lpg.AttrReply); ok {
			return r
		}
	}
	return ""
}

// stageCounts reads the stage's per-CPU counters (the drop sites, then
// the answers) as outcomes named as verify names them; a counter it
// cannot read is left out.
func stageCounts(s *Stage, m *ebpf.Map) []dataplane.Outcome {
	names := make([]string, 0, len(s.DropSites)+len(s.Answers))
	for _, d := range s.DropSites {
		names = append(names, "drop "+d.String())
	}
	for _, n := range s.Program {
		if len(n.Ports) == 0 {
			names = append(names, "reply "+replyOf(n))
		}
	}
	var out []dataplane.Outcome
	for i, name := range names {
		var per []uint64
		if err := m.Lookup(uint32(i), &per); err != nil {
			continue
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		if n > 0 {
			out = append(out, dataplane.Outcome{Name: name, Count: n})
		}
	}
	return out
}

// block is straight-line code that ends in a jump or an exit.
type block struct {
	label string
	in    asm.Instructions
}

// stageGen emits the checks.
type stageGen struct {
	blocks []*block
	cur    *block
	n      int
}

func (g *stageGen) start(label string) {
	g.cur = &block{label: label}
	g.blocks = append(g.blocks, g.cur)
}

func (g *stageGen) add(x ...asm.Instruction) { g.cur.in = append(g.cur.in, x...) }

func (g *stageGen) label(prefix string) string {
	g.n++
	return fmt.Sprintf("sg_%s%d", prefix, g.n)
}

// load copies n bytes of the frame at the offset in reg (plus off) to the
// stack at dst, or jumps to fail.
func (g *stageGen) load(reg asm.Register, off int32, dst int16, n int32, fail string) {
	g.add(asm.Mov.Reg(asm.R1, asm.R6))
	if reg == asm.R0 {
		g.add(asm.Mov.Imm(asm.R2, off))
	} else {
		g.add(asm.Mov.Reg(asm.R2, reg), asm.Add.Imm(asm.R2, off))
	}
	g.add(asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(dst)), asm.Mov.Imm(asm.R4, n), asm.FnXdpLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, fail))
}

// be reads a big-endian value of the stack into dst (uses R5 when the
// value is not aligned: the verifier refuses a misaligned stack access).
func (g *stageGen) be(dst asm.Register, at int16, size asm.Size) {
	if n := int16(size.Sizeof()); at%n != 0 {
		g.add(asm.LoadMem(dst, asm.R10, at, asm.Byte))
		for i := int16(1); i < n; i++ {
			g.add(asm.LSh.Imm(dst, 8), asm.LoadMem(asm.R5, asm.R10, at+i, asm.Byte), asm.Or.Reg(dst, asm.R5))
		}
		return
	}
	g.add(asm.LoadMem(dst, asm.R10, at, size))
	if size != asm.Byte {
		g.add(asm.HostTo(asm.BE, dst, size))
	}
}

// set stores register r as field name and marks its header present.
func (g *stageGen) set(name string, r asm.Register) {
	slot, has, _ := fieldSlot(name)
	g.add(asm.StoreMem(asm.R10, slot, r, asm.DWord), asm.Or.Imm(asm.R9, has))
}

func (g *stageGen) setImm(name string, v int32) {
	slot, has, _ := fieldSlot(name)
	g.add(asm.Mov.Imm(asm.R1, v), asm.StoreMem(asm.R10, slot, asm.R1, asm.DWord), asm.Or.Imm(asm.R9, has))
}

// mac reads a 48-bit address at the stack offset into dst (uses R1).
func (g *stageGen) mac(dst asm.Register, at int16) {
	g.be(dst, at, asm.Half)
	g.add(asm.LSh.Imm(dst, 32))
	g.be(asm.R1, at+2, asm.Word)
	g.add(asm.Or.Reg(dst, asm.R1))
}

// flag sets field name to 1 when the jump j (built with the label it
// gets) holds, else 0.
func (g *stageGen) flag(name string, cond func(yes string) []asm.Instruction) {
	yes, done := g.label("yes"), g.label("flag")
	g.add(cond(yes)...)
	g.add(asm.Mov.Imm(asm.R0, 0), asm.Ja.Label(done), asm.Mov.Imm(asm.R0, 1).WithSymbol(yes))
	g.add(asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(done))
	g.set(name, asm.R0)
}

// decode reads the fields (internal/fallback's decode, for the fields of
// stageFields); it ends at label done, R9 holding the presence bits.
func (g *stageGen) decode(done string) {
	g.add(asm.Mov.Imm(asm.R9, 0),
		asm.Mov.Reg(asm.R1, asm.R6), asm.FnXdpGetBuffLen.Call(),
		asm.StoreMem(asm.R10, sgLen, asm.R0, asm.DWord))
	g.set("frame.len", asm.R0)
	// The kernel drops a frame with a bad CRC before any program runs.
	g.setImm("frame.crc_ok", 1)
	g.load(asm.R0, 0, sgEth, 14, done)
	g.mac(asm.R2, sgEth)
	g.set("eth.dst", asm.R2)
	g.mac(asm.R2, sgEth+6)
	g.set("eth.src", asm.R2)
	g.setImm("eth.len_ok", 1)
	g.be(asm.R2, sgEth+12, asm.Half)
	g.add(asm.Mov.Imm(asm.R8, 14), asm.JNE.Imm(asm.R2, 0x8100, "sg_etype"))
	// IEEE 802.1Q: one tag, then the EtherType.
	g.load(asm.R0, 14, sgL4, 4, done)
	g.be(asm.R2, sgL4, asm.Half)
	g.add(asm.And.Imm(asm.R2, 0x0fff))
	g.set("vlan.id", asm.R2)
	g.be(asm.R2, sgL4+2, asm.Half)
	g.add(asm.Mov.Imm(asm.R8, 18))
	g.add(asm.Mov.Reg(asm.R2, asm.R2).WithSymbol("sg_etype"))
	g.set("eth.type", asm.R2)
	g.add(asm.JEq.Imm(asm.R2, 0x0806, "sg_arp"), asm.JNE.Imm(asm.R2, 0x0800, done))

	// IPv4, RFC 791 §3.1.
	g.load(asm.R8, 0, sgHdr, 20, done)
	g.add(asm.LoadMem(asm.R0, asm.R10, sgLen, asm.DWord), asm.Sub.Reg(asm.R0, asm.R8), asm.StoreMem(asm.R10, sgIPLen, asm.R0, asm.DWord))
	g.add(asm.LoadMem(asm.R2, asm.R10, sgHdr, asm.Byte), asm.RSh.Imm(asm.R2, 4))
	g.set("ip.version", asm.R2)
	g.add(asm.LoadMem(asm.R2, asm.R10, sgHdr, asm.Byte), asm.And.Imm(asm.R2, 0xf))
	g.set("ip.ihl", asm.R2)
	g.flag("ip.options", func(yes string) []asm.Instruction { return []asm.Instruction{asm.JGT.Imm(asm.R2, 5, yes)} })
	g.be(asm.R2, sgHdr+2, asm.Half)
	g.set("ip.len", asm.R2)
	g.add(asm.LoadMem(asm.R2, asm.R10, sgHdr+8, asm.Byte))
	g.set("ip.ttl", asm.R2)
	g.be(asm.R2, sgHdr+6, asm.Half)
	g.flag("ip.frag", func(yes string) []asm.Instruction { return []asm.Instruction{asm.JSet.Imm(asm.R2, 0x3fff, yes)} })
	g.add(asm.LoadMem(asm.R2, asm.R10, sgHdr+9, asm.Byte))
	g.set("ip.proto", asm.R2)
	g.be(asm.R2, sgHdr+12, asm.Word)
	g.set("ip.src", asm.R2)
	g.be(asm.R2, sgHdr+16, asm.Word)
	g.set("ip.dst", asm.R2)
	// ip.hdr_ok: IHL ≥ 5 and the header fits; without it neither the
	// checksum nor the length is good.
	ihl, _, _ := fieldSlot("ip.ihl")
	g.add(asm.LoadMem(asm.R2, asm.R10, ihl, asm.DWord), asm.LSh.Imm(asm.R2, 2),
		asm.LoadMem(asm.R3, asm.R10, sgIPLen, asm.DWord))
	g.flag("ip.hdr_ok", func(yes string) []asm.Instruction {
		no := g.label("no")
		return []asm.Instruction{asm.JLT.Imm(asm.R2, 20, no), asm.JLE.Reg(asm.R2, asm.R3, yes), asm.Ja.Label(no), asm.Mov.Imm(asm.R0, 0).WithSymbol(no)}
	})
	g.add(asm.JNE.Imm(asm.R0, 0, "sg_hdrok"))
	g.setImm("ip.csum_ok", 0)
	g.setImm("ip.len_ok", 0)
	g.add(asm.Ja.Label(done))
	// The header checksum (RFC 1071) over IHL words, options included.
	g.add(asm.Mov.Imm(asm.R7, 0).WithSymbol("sg_hdrok"))
	for k := range 10 {
		g.add(asm.LoadMem(asm.R2, asm.R10, ihl, asm.DWord), asm.JLE.Imm(asm.R2, int32(5+k), "sg_sum"))
		g.load(asm.R8, int32(20+4*k), int16(sgHdr+20+4*k), 4, done)
	}
	g.add(asm.Mov.Imm(asm.R3, 0).WithSymbol("sg_sum"))
	for w := range 30 {
		if w == 10 || w > 10 && w%2 == 0 {
			g.add(asm.LoadMem(asm.R2, asm.R10, ihl, asm.DWord), asm.JLE.Imm(asm.R2, int32(5+(w-10)/2), "sg_fold"))
		}
		g.be(asm.R2, int16(sgHdr+2*w), asm.Half)
		g.add(asm.Add.Reg(asm.R3, asm.R2))
	}
	g.add(asm.StoreMem(asm.R10, sgHdrSum, asm.R3, asm.DWord).WithSymbol("sg_fold"))
	g.fold(asm.R3)
	g.flag("ip.csum_ok", func(yes string) []asm.Instruction { return []asm.Instruction{asm.JEq.Imm(asm.R3, 0xffff, yes)} })
	// ip.len_ok: the total length covers the header and fits the frame.
	g.be(asm.R4, sgHdr+2, asm.Half)
	g.add(asm.LoadMem(asm.R2, asm.R10, ihl, asm.DWord), asm.LSh.Imm(asm.R2, 2),
		asm.LoadMem(asm.R3, asm.R10, sgIPLen, asm.DWord))
	g.flag("ip.len_ok", func(yes string) []asm.Instruction {
		no := g.label("no")
		return []asm.Instruction{asm.JLT.Reg(asm.R4, asm.R2, no), asm.JLE.Reg(asm.R4, asm.R3, yes), asm.Ja.Label(no), asm.Mov.Imm(asm.R0, 0).WithSymbol(no)}
	})
	// The transport header of a whole IPv4 datagram.
	frag, _, _ := fieldSlot("ip.frag")
	ver, _, _ := fieldSlot("ip.version")
	g.add(asm.JEq.Imm(asm.R0, 0, done),
		asm.LoadMem(asm.R0, asm.R10, ver, asm.DWord), asm.JNE.Imm(asm.R0, 4, done),
		asm.LoadMem(asm.R0, asm.R10, frag, asm.DWord), asm.JNE.Imm(asm.R0, 0, done),
		asm.Sub.Reg(asm.R4, asm.R2), // the transport bytes
		asm.Add.Reg(asm.R8, asm.R2), // the transport header's offset
		asm.StoreMem(asm.R10, sgIPLen, asm.R4, asm.DWord),
		asm.JLT.Imm(asm.R4, 8, done),
		asm.LoadMem(asm.R2, asm.R10, sgHdr+9, asm.Byte),
		asm.JEq.Imm(asm.R2, 1, "sg_icmp"), asm.JNE.Imm(asm.R2, 17, done))
	g.load(asm.R8, 0, sgL4, 8, done)
	g.be(asm.R2, sgL4, asm.Half)
	g.set("udp.sport", asm.R2)
	g.be(asm.R2, sgL4+2, asm.Half)
	g.set("udp.dport", asm.R2)
	g.be(asm.R2, sgL4+4, asm.Half)
	g.set("udp.len", asm.R2)
	g.add(asm.LoadMem(asm.R3, asm.R10, sgIPLen, asm.DWord))
	g.flag("udp.len_ok", func(yes string) []asm.Instruction {
		no := g.label("no")
		return []asm.Instruction{asm.JLT.Imm(asm.R2, 8, no), asm.JLE.Reg(asm.R2, asm.R3, yes), asm.Ja.Label(no), asm.Mov.Imm(asm.R0, 0).WithSymbol(no)}
	})
	g.add(asm.Ja.Label(done))
	g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol("sg_icmp"))
	g.load(asm.R8, 0, sgL4, 8, done)
	g.add(asm.LoadMem(asm.R2, asm.R10, sgL4, asm.Byte))
	g.set("icmp.type", asm.R2)
	g.add(asm.LoadMem(asm.R2, asm.R10, sgL4+1, asm.Byte))
	g.set("icmp.code", asm.R2)
	g.icmpSum(done)
	g.add(asm.Ja.Label(done))

	// ARP, RFC 826: the Ethernet/IPv4 body.
	g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol("sg_arp"))
	g.load(asm.R8, 0, sgHdr, 28, done)
	g.be(asm.R2, sgHdr+6, asm.Half)
	g.set("arp.op", asm.R2)
	g.mac(asm.R2, sgHdr+8)
	g.set("arp.sha", asm.R2)
	g.be(asm.R2, sgHdr+14, asm.Word)
	g.set("arp.spa", asm.R2)
	g.be(asm.R2, sgHdr+24, asm.Word)
	g.set("arp.tpa", asm.R2)
	g.be(asm.R2, sgHdr, asm.Half)
	g.be(asm.R3, sgHdr+2, asm.Half)
	g.add(asm.LoadMem(asm.R4, asm.R10, sgHdr+4, asm.Byte), asm.LoadMem(asm.R5, asm.R10, sgHdr+5, asm.Byte))
	g.flag("arp.valid", func(yes string) []asm.Instruction {
		no := g.label("no")
		return []asm.Instruction{asm.JNE.Imm(asm.R2, 1, no), asm.JNE.Imm(asm.R3, 0x0800, no), asm.JNE.Imm(asm.R4, 6, no), asm.JEq.Imm(asm.R5, 4, yes),
			asm.Ja.Label(no), asm.Mov.Imm(asm.R0, 0).WithSymbol(no)}
	})
	g.add(asm.Ja.Label(done))
}

// icmpPreSum sums an ICMP datagram of at most 1500 bytes (its IPv4
// header and message, as 16-bit words, RFC 1071 §4.1: integers, an odd
// byte as the high half of a last word, the carries folded at the end)
// into sgSum, and sets sgSummed; a longer one, or one cut short, it
// leaves unsummed. It runs first, before the decoder, where a frame
// reaches it in one of two states (tagged or not): the verifier follows
// its loop (bounded loops, Linux 5.3, kernel/bpf/verifier.c: a back edge
// is followed while the state differs, here the word count and the read
// pointer's offset) once for each state that reaches it, about 750
// steps of 10 instructions, against the 1,000,000 instructions it
// processes for a program (BPF_COMPLEXITY_LIMIT_INSNS,
// include/linux/bpf.h); behind the decoder's branches a hundred states
// reach it (730,000 instructions). It reads the frame directly
// (xdp_md's data and data_end) with a bounds check each step.
func (g *stageGen) icmpPreSum() {
	untagged, loop, tail, odd, store, done := g.label("pretag"), g.label("preloop"), g.label("pretail"), g.label("preodd"), g.label("prestore"), g.label("presum")
	g.add(asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(asm.R2, asm.R6, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(asm.R0, asm.R1), asm.Add.Imm(asm.R0, 14), asm.JGT.Reg(asm.R0, asm.R2, done),
		asm.LoadMem(asm.R3, asm.R1, 12, asm.Half), asm.HostTo(asm.BE, asm.R3, asm.Half), asm.Mov.Imm(asm.R4, 14),
		asm.JNE.Imm(asm.R3, 0x8100, untagged),
		asm.Mov.Reg(asm.R0, asm.R1), asm.Add.Imm(asm.R0, 18), asm.JGT.Reg(asm.R0, asm.R2, done),
		asm.LoadMem(asm.R3, asm.R1, 16, asm.Half), asm.HostTo(asm.BE, asm.R3, asm.Half), asm.Mov.Imm(asm.R4, 18))
	g.add(asm.JNE.Imm(asm.R3, 0x0800, done).WithSymbol(untagged),
		asm.Add.Reg(asm.R1, asm.R4),
		asm.Mov.Reg(asm.R0, asm.R1), asm.Add.Imm(asm.R0, 20), asm.JGT.Reg(asm.R0, asm.R2, done),
		asm.LoadMem(asm.R3, asm.R1, 9, asm.Byte), asm.JNE.Imm(asm.R3, 1, done),
		asm.LoadMem(asm.R4, asm.R1, 2, asm.Half), asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.JGT.Imm(asm.R4, sumMax, done),
		asm.Mov.Imm(asm.R3, 0), asm.Mov.Reg(asm.R5, asm.R4), asm.RSh.Imm(asm.R5, 1))
	g.add(asm.JEq.Imm(asm.R5, 0, tail).WithSymbol(loop),
		asm.Mov.Reg(asm.R0, asm.R1), asm.Add.Imm(asm.R0, 2), asm.JGT.Reg(asm.R0, asm.R2, done),
		asm.LoadMem(asm.R0, asm.R1, 0, asm.Half), asm.HostTo(asm.BE, asm.R0, asm.Half),
		asm.Add.Reg(asm.R3, asm.R0), asm.Add.Imm(asm.R1, 2), asm.Sub.Imm(asm.R5, 1), asm.Ja.Label(loop))
	g.add(asm.JSet.Imm(asm.R4, 1, odd).WithSymbol(tail), asm.Ja.Label(store),
		asm.Mov.Reg(asm.R0, asm.R1).WithSymbol(odd), asm.Add.Imm(asm.R0, 1), asm.JGT.Reg(asm.R0, asm.R2, done),
		asm.LoadMem(asm.R0, asm.R1, 0, asm.Byte), asm.LSh.Imm(asm.R0, 8), asm.Add.Reg(asm.R3, asm.R0))
	g.add(asm.StoreMem(asm.R10, sgSum, asm.R3, asm.DWord).WithSymbol(store), asm.Mov.Imm(asm.R0, 1), asm.StoreMem(asm.R10, sgSummed, asm.R0, asm.DWord))
	g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(done))
}

// icmpSum sets icmp.csum_ok (RFC 792: the 16-bit one's complement of
// the one's complement sum of the message): the message's sum is the
// datagram's (icmpPreSum) less its header's, kept at sgSum for the echo
// reply. A datagram longer than 1500 bytes is not summed (icmp.csum_ok
// 0; the model's guard hands such frames on before the check).
func (g *stageGen) icmpSum(done string) {
	none := g.label("sumnone")
	g.add(asm.LoadMem(asm.R0, asm.R10, sgSummed, asm.DWord), asm.JEq.Imm(asm.R0, 0, none),
		asm.LoadMem(asm.R3, asm.R10, sgSum, asm.DWord), asm.LoadMem(asm.R2, asm.R10, sgHdrSum, asm.DWord),
		asm.Sub.Reg(asm.R3, asm.R2), asm.StoreMem(asm.R10, sgSum, asm.R3, asm.DWord))
	g.fold(asm.R3)
	g.flag("icmp.csum_ok", func(yes string) []asm.Instruction { return []asm.Instruction{asm.JEq.Imm(asm.R3, 0xffff, yes)} })
	g.add(asm.Ja.Label(done))
	g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(none))
	g.set("icmp.csum_ok", asm.R0)
}

// fold folds the carries of a sum in r into its low 16 bits, as
// run/dataplane's fold (uses R2; three rounds fold a sum below 2^32).
func (g *stageGen) fold(r asm.Register) {
	for range 3 {
		g.add(asm.Mov.Reg(asm.R2, r), asm.RSh.Imm(asm.R2, 16), asm.And.Imm(r, 0xffff), asm.Add.Reg(r, asm.R2))
	}
}

// cmpJumps are the jumps of the comparisons (unsigned, as pred.Holds).
var cmpJumps = map[pred.Op]asm.JumpOp{pred.Eq: asm.JEq, pred.Ne: asm.JNE, pred.Lt: asm.JLT, pred.Le: asm.JLE, pred.Gt: asm.JGT, pred.Ge: asm.JGE}

// cond emits a predicate: a jump to yes when it holds, to no otherwise.
func (g *stageGen) cond(e pred.Expr, yes, no string) {
	switch e := e.(type) {
	case nil:
		g.add(asm.Ja.Label(yes))
	case pred.Const:
		if e {
			g.add(asm.Ja.Label(yes))
		} else {
			g.add(asm.Ja.Label(no))
		}
	case pred.Not:
		g.cond(e.X, no, yes)
	case pred.And, pred.Or:
		xs, and := []pred.Expr(nil), false
		if a, ok := e.(pred.And); ok {
			xs, and = a.X, true
		} else {
			xs = e.(pred.Or).X
		}
		if len(xs) == 0 {
			g.cond(pred.Const(and), yes, no)
			return
		}
		for i, x := range xs {
			if i == len(xs)-1 {
				g.cond(x, yes, no)
				break
			}
			next := g.label("c")
			if and {
				g.cond(x, next, no)
			} else {
				g.cond(x, yes, next)
			}
			g.start(next)
		}
	case pred.Cmp:
		slot, has, _ := fieldSlot(e.Field)
		// An absent field makes every comparison false (pred.Eval).
		g.add(asm.Mov.Reg(asm.R0, asm.R9), asm.And.Imm(asm.R0, has), asm.JEq.Imm(asm.R0, 0, no),
			asm.LoadMem(asm.R1, asm.R10, slot, asm.DWord))
		if e.Mask != 0 {
			g.add(asm.LoadImm(asm.R2, int64(e.Mask), asm.DWord), asm.And.Reg(asm.R1, asm.R2))
		}
		jump := func(op asm.JumpOp, v uint64, to string) {
			g.add(asm.LoadImm(asm.R2, int64(v), asm.DWord), op.Reg(asm.R1, asm.R2, to))
		}
		switch e.Op {
		case pred.Eq, pred.Ne, pred.Lt, pred.Le, pred.Gt, pred.Ge:
			jump(cmpJumps[e.Op], e.Value, yes)
		case pred.In:
			for _, r := range e.Ranges {
				if r.Lo == r.Hi {
					jump(asm.JEq, r.Lo, yes)
					continue
				}
				skip := g.label("r")
				jump(asm.JLT, r.Lo, skip)
				jump(asm.JLE, r.Hi, yes)
				g.add(asm.Ja.Label(skip))
				g.start(skip)
			}
		}
		g.add(asm.Ja.Label(no))
	}
}

// arpAnswer turns the ARP request in the frame into its answer, as the
// data plane's TxL3ARPInitiateResponse and TxL2EtherFillHeader build it
// (RFC 826, "Packet Reception": opcode reply, our hardware address for
// the protocol address asked, to the asker; untagged, 42 bytes), and
// sends it back with XDP_TX, counted at key, when the one word of the
// map cfg says so. A frame it cannot resize, or does not answer, is
// handed on to out (the software answers it).
func (g *stageGen) arpAnswer(mac [6]byte, key, cfg int, out string) {
	g.answersOn(cfg, out)
	copyBytes, constBytes := g.copyBytes, g.constBytes
	copyBytes(0, sgHdr+8, 6) // to the sender's hardware address
	constBytes(6, mac[:])
	constBytes(12, []byte{0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2})
	constBytes(22, mac[:])
	copyBytes(28, sgHdr+24, 4) // the address asked for is ours
	copyBytes(32, sgHdr+8, 6)
	copyBytes(38, sgHdr+14, 4)
	// The frame becomes the answer: its tail trimmed to the answer's
	// length (plus a tag's 4 bytes), then a tag taken off the head.
	tagged := g.label("tagged")
	g.add(asm.Mov.Imm(asm.R7, 0), asm.Mov.Reg(asm.R0, asm.R9), asm.And.Imm(asm.R0, hasVlan), asm.JEq.Imm(asm.R0, 0, tagged),
		asm.Mov.Imm(asm.R7, 4),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol(tagged), asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Imm(asm.R2, arpLen), asm.Add.Reg(asm.R2, asm.R7), asm.Sub.Reg(asm.R2, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6), asm.FnXdpAdjustTail.Call(), asm.JNE.Imm(asm.R0, 0, out),
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Reg(asm.R2, asm.R7), asm.FnXdpAdjustHead.Call(), asm.JNE.Imm(asm.R0, 0, "sg_aborted"),
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, 0), asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, sgOut), asm.Mov.Imm(asm.R4, arpLen),
		asm.FnXdpStoreBytes.Call(), asm.JNE.Imm(asm.R0, 0, "sg_aborted"),
		asm.StoreImm(asm.R10, sgKey, int64(key), asm.Word), asm.Mov.Imm(asm.R7, 3), // XDP_TX
		asm.Ja.Label("sg_count"))
}

// answersOn goes to out when the answers are switched off (setAnswers):
// the software answers.
func (g *stageGen) answersOn(cfg int, out string) {
	g.add(asm.StoreImm(asm.R10, sgKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, cfg), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, sgKey), asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, out), asm.LoadMem(asm.R0, asm.R0, 0, asm.Word), asm.JEq.Imm(asm.R0, 0, out))
}

// copyBytes copies n bytes of the stack at from to the answer at to.
func (g *stageGen) copyBytes(to, from, n int16) {
	for i := range n {
		g.add(asm.LoadMem(asm.R1, asm.R10, from+i, asm.Byte), asm.StoreMem(asm.R10, sgOut+to+i, asm.R1, asm.Byte))
	}
}

// constBytes writes b to the answer at to.
func (g *stageGen) constBytes(to int16, b []byte) {
	for i, v := range b {
		g.add(asm.StoreImm(asm.R10, sgOut+to+int16(i), int64(v), asm.Byte))
	}
}

// putBE16 writes the low 16 bits of r to the answer at to, big-endian
// (uses R0).
func (g *stageGen) putBE16(to int16, r asm.Register) {
	g.add(asm.Mov.Reg(asm.R0, r), asm.RSh.Imm(asm.R0, 8), asm.StoreMem(asm.R10, sgOut+to, asm.R0, asm.Byte),
		asm.StoreMem(asm.R10, sgOut+to+1, r, asm.Byte))
}

// echoAnswer turns the echo request in the frame into its reply, byte
// for byte as the data plane's transmit chain builds it
// (TxL3ICMPInitiateResponse, TxL3ICMPFillChecksum, TxL3IPv4FillHeader,
// TxL3IPv4FillChecksum, TxL2EtherFillHeader): the message returned with
// type and code 0 (RFC 792, "Echo or Echo Reply Message"), from the
// address the request was sent to, to its sender (RFC 1122 §3.2.2.6), in
// an IPv4 header without options, TTL 64, not fragmented, with an
// identification counted per CPU as the software counts it per receive
// loop: the answer's counter (key), which counts the replies sent from
// this CPU; to the sender's hardware address, untagged. It sends it
// back with XDP_TX when the one word of the map cfg says so. The message
// stays where it is: the frame is trimmed to the datagram's end, then
// its head (a priority tag, IPv4 options) taken off. A frame it cannot
// resize is handed on to out (the software answers it). R8 is the
// message's offset, sgIPLen its length, sgSum its sum (icmpSum).
func (g *stageGen) echoAnswer(mac [6]byte, key, counts, cfg int, out string) {
	g.answersOn(cfg, out)
	g.add(asm.LoadMem(asm.R7, asm.R10, sgIPLen, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6), asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Reg(asm.R2, asm.R8), asm.Add.Reg(asm.R2, asm.R7), asm.Sub.Reg(asm.R2, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6), asm.FnXdpAdjustTail.Call(), asm.JNE.Imm(asm.R0, 0, out),
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Reg(asm.R2, asm.R8), asm.Sub.Imm(asm.R2, echoHdr), asm.FnXdpAdjustHead.Call(),
		asm.JNE.Imm(asm.R0, 0, "sg_aborted"))
	// Counted first: the count is the identification (TxL3IPv4FillHeader
	// counts its frames from 1, 16 bits wide).
	g.add(asm.StoreImm(asm.R10, sgKey, int64(key), asm.Word),
		asm.LoadMapPtr(asm.R1, counts), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, sgKey), asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "sg_aborted"),
		asm.LoadMem(asm.R8, asm.R0, 0, asm.DWord), asm.Add.Imm(asm.R8, 1), asm.StoreMem(asm.R0, 0, asm.R8, asm.DWord),
		asm.And.Imm(asm.R8, 0xffff))
	g.copyBytes(0, sgEth+6, 6) // to the sender's hardware address
	g.constBytes(6, mac[:])
	g.constBytes(12, []byte{0x08, 0x00, 0x45, 0})
	g.add(asm.Mov.Reg(asm.R1, asm.R7), asm.Add.Imm(asm.R1, 20))
	g.putBE16(16, asm.R1) // the total length
	g.putBE16(18, asm.R8) // the identification
	g.constBytes(20, []byte{0, 0, 64, 1})
	g.copyBytes(26, sgHdr+16, 4) // from the address the request was sent to
	g.copyBytes(30, sgHdr+12, 4)
	// The header checksum (RFC 791 §3.1) over the words just written.
	g.add(asm.Mov.Imm(asm.R3, 0x4500+0x4001), asm.Add.Reg(asm.R3, asm.R7), asm.Add.Imm(asm.R3, 20), asm.Add.Reg(asm.R3, asm.R8))
	for at := int16(sgHdr + 12); at < sgHdr+20; at += 2 {
		g.be(asm.R2, at, asm.Half)
		g.add(asm.Add.Reg(asm.R3, asm.R2))
	}
	g.fold(asm.R3)
	g.add(asm.Xor.Imm(asm.R3, 0xffff))
	g.putBE16(24, asm.R3)
	// The message's checksum: its sum without the request's type, code
	// and checksum, which the reply has as zeros.
	g.constBytes(echoHdr, []byte{0, 0})
	g.add(asm.LoadMem(asm.R3, asm.R10, sgSum, asm.DWord))
	g.be(asm.R2, sgL4, asm.Half)
	g.add(asm.Sub.Reg(asm.R3, asm.R2))
	g.be(asm.R2, sgL4+2, asm.Half)
	g.add(asm.Sub.Reg(asm.R3, asm.R2))
	g.fold(asm.R3)
	g.add(asm.Xor.Imm(asm.R3, 0xffff))
	g.putBE16(echoHdr+2, asm.R3)
	g.add(asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, 0), asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, sgOut), asm.Mov.Imm(asm.R4, echoHdr+4),
		asm.FnXdpStoreBytes.Call(), asm.JNE.Imm(asm.R0, 0, "sg_aborted"),
		asm.Mov.Imm(asm.R0, 3), asm.Return()) // XDP_TX
}

// stageProgram returns the checks: they start at the program's first
// instruction (R6 the context) and end by jumping to out, with XDP_DROP
// or with XDP_TX. counts is the per-CPU counter array's file descriptor:
// the drop sites' counters, then the answers'; cfg the stage's
// configuration word's (setAnswers).
func stageProgram(nodes []prg.StageNode, mac [6]byte, counts, cfg int, out string) asm.Instructions {
	g := &stageGen{}
	nodeLabel := func(name string) string { return "sg_node_" + name }
	g.start("sg_entry")
	// Every slot the checks read starts at zero: the verifier refuses a
	// read of stack it has not seen written.
	g.add(asm.Mov.Imm(asm.R1, 0))
	for at := sgField - 8*int16(len(stageFields)-1); at < sgEth+16; at += 8 {
		g.add(asm.StoreMem(asm.R10, at, asm.R1, asm.DWord))
	}
	for _, at := range []int16{sgSum, sgSummed, sgHdrSum} {
		g.add(asm.StoreMem(asm.R10, at, asm.R1, asm.DWord))
	}
	if slices.ContainsFunc(nodes, func(n prg.StageNode) bool { return n.Name == "RxL3ICMPValidChecksum" }) {
		g.icmpPreSum()
	}
	g.decode(nodeLabel(nodes[0].Name))
	site := 0
	nsites := 0
	for _, n := range nodes {
		for _, p := range n.Ports {
			if p.Drops() {
				nsites++
			}
		}
	}
	answer := nsites
	for _, n := range nodes {
		g.start(nodeLabel(n.Name))
		if len(n.Ports) == 0 {
			if replyOf(n) == "arp" {
				g.arpAnswer(mac, answer, cfg, out)
			} else {
				g.echoAnswer(mac, answer, counts, cfg, out)
			}
			answer++
			continue
		}
		def := -1
		targets := make([]string, len(n.Ports))
		for i := range n.Ports {
			targets[i] = g.label("port")
		}
		for i, p := range n.Ports {
			if p.Pred == nil {
				if def < 0 {
					def = i
				}
				continue
			}
			next := g.label("try")
			g.cond(p.Pred, targets[i], next)
			g.start(next)
		}
		if def >= 0 {
			g.add(asm.Ja.Label(targets[def]))
		} else {
			g.add(asm.Ja.Label(out)) // no port: the software decides
		}
		for i, p := range n.Ports {
			g.start(targets[i])
			switch {
			case p.Drops():
				g.add(asm.StoreImm(asm.R10, sgKey, int64(site), asm.Word), asm.Mov.Imm(asm.R7, 1), asm.Ja.Label("sg_count")) // XDP_DROP
				site++
			case p.Next == prg.ProgramOut:
				g.add(asm.Ja.Label(out))
			default:
				g.add(asm.Ja.Label(nodeLabel(p.Next)))
			}
		}
	}
	// A counted decision: the counter at sgKey, then the action in R7.
	g.start("sg_count")
	g.add(asm.LoadMapPtr(asm.R1, counts), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, sgKey), asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "sg_counted"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord), asm.Add.Imm(asm.R1, 1), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R7).WithSymbol("sg_counted"), asm.Return())
	// An answer half built: the frame is no longer the request.
	g.start("sg_aborted")
	g.add(asm.Mov.Imm(asm.R0, 0), asm.Return()) // XDP_ABORTED
	return g.emit()
}

// emit lays out the blocks reached from the first, in order: the
// verifier refuses an instruction no jump reaches.
func (g *stageGen) emit() asm.Instructions {
	byLabel := map[string]int{}
	for i, b := range g.blocks {
		byLabel[b.label] = i
	}
	reached := make([]bool, len(g.blocks))
	todo := []int{0}
	reached[0] = true
	for len(todo) > 0 {
		b := g.blocks[todo[0]]
		todo = todo[1:]
		for _, x := range b.in {
			if i, ok := byLabel[x.Reference()]; ok && !reached[i] {
				reached[i] = true
				todo = append(todo, i)
			}
		}
	}
	var out asm.Instructions
	for i, b := range g.blocks {
		if !reached[i] || len(b.in) == 0 {
			continue
		}
		in := slices.Clone(b.in)
		in[0] = in[0].WithSymbol(b.label)
		out = append(out, in...)
	}
	return out
}

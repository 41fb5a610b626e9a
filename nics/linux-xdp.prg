// linux-xdp: the steering a Linux host can do in software, in front of
// dragonc's own receive loops, for a NIC whose driver cannot steer (a veth,
// or a NIC without ntuple filters). It is not silicon: `dragonc run`
// generates it as eBPF programs (package run) on the packet socket path
// (a PACKET_FANOUT_EBPF program picks the loop) and fills its tables, which
// are eBPF hash maps, from the plan.
//
// Sources. The table capacities are the max_entries dragonc gives the hash
// maps (run.FlowCapacity, run.PortCapacity); the kernel bounds a hash map
// only by memory (Documentation/bpf/map_hash.rst). The queue count is
// dragonc run's choice of one receive loop per core; a fanout group takes
// up to PACKET_FANOUT_MAX sockets (net/packet/internal.h: 65536 since
// Linux 5.13, 256 before). The kernel checks the Ethernet CRC before any
// program sees a frame (a NIC drops a bad one unless rx-fcs/rx-all is on,
// and a software link has none), so the stage's CRC check costs nothing.
graph linux_xdp {
    resources Device {
        stage "ebpf" // built by dragonc run, not configured through a driver
        rx_queues 64
        tx_queues 64
    }

    cluster Rx {
        // The XDP program's checks: the embedder places here the longest
        // part of the LPG's receive path, from its first node, made of the
        // nodes below (prg/program.go), and run generates them as eBPF
        // (run/stagegen.go). A node in drops drops the frames that fail it
        // with XDP_DROP, counted by node; the others hand such frames on
        // (to the kernel, or to a receive loop when they are the stack's),
        // because the host needs them: frames of a VLAN, to other MAC or
        // IP addresses, ARP replies, TCP, IPv6 and fragments are the
        // kernel's. The drops are of frames the kernel would drop as well
        // (ip_rcv_core drops a bad IPv4 version, header length, total
        // length or header checksum; ip_route_input_slow drops martian
        // sources) or that no host may send (a group source address, IEEE
        // 802.3 §3.2.3 (b); an ARP sender no host may have).
        config Stage {
            program {
                runs [
                    RxL2EtherValidCRC RxL2EtherValidLength RxL2EtherValidUntagged RxL2EtherValidMTU
                    RxL2EtherValidDest RxL2EtherValidSource RxL2EtherClassifyL3 RxL3ARPValidHeader
                    RxL3ARPIsRequest RxL3ARPLocalIPDest RxL3ARPValidSender RxL3IPv4ValidVersion
                    RxL3IPv4ValidHeaderLength RxL3IPv4ValidLength RxL3IPv4ValidChecksum
                    RxL3IPv4ValidSource RxL3IPv4ValidLocalIP RxL3IPv4ValidReassembly
                    RxL3IPv4Classify RxL4UDPValidHeaderLength RxL4UDPValidLength
                    RxL3ICMPValidHeaderLength RxL3ICMPValidChecksum RxL3ICMPIsTypeRequest
                    RxL3ICMPValidUnicastDest
                ]
                drops [
                    RxL2EtherValidCRC RxL2EtherValidLength RxL2EtherValidSource RxL3ARPValidHeader
                    RxL3ARPValidSender RxL3IPv4ValidVersion RxL3IPv4ValidHeaderLength
                    RxL3IPv4ValidLength RxL3IPv4ValidChecksum RxL3IPv4ValidSource
                    RxL4UDPValidHeaderLength RxL4UDPValidLength RxL3ICMPValidHeaderLength
                    RxL3ICMPValidChecksum
                ]
                // An ARP request that passed the LPG's checks (for one of
                // our unicast addresses, from a sender a host may be, to
                // our MAC or the broadcast, from an individual address)
                // is answered in place with XDP_TX.
                // So is an ICMP echo request that passed them (to one of
                // our unicast addresses, from a source that is no
                // martian, with a good checksum): the reply is the
                // software's, byte for byte (run/dataplane's
                // TxL3ICMPInitiateResponse and the fills after it). A
                // bad ICMP checksum is dropped, as icmp_rcv drops it
                // (net/ipv4/icmp.c, csum_error); other ICMP types and
                // echo requests to a broadcast are handed on.
                answers [RxL3ARPNeedsResponse RxL3ICMPNeedsResponse]
                // The ICMP checksum (RFC 1071) is a loop over the
                // datagram's 16-bit words with a bounds check each step,
                // run first (before the checks' branches, where a frame
                // reaches it tagged or not), which the verifier follows
                // to its bound once for each state that reaches it
                // (bounded loops, Linux 5.3): about 15,000 of the
                // 1,000,000 instructions it processes for a program
                // (BPF_COMPLEXITY_LIMIT_INSNS, include/linux/bpf.h). The
                // bound is a 1500-byte datagram (a 1480-byte message); a
                // longer datagram (an interface with a larger MTU) is
                // handed on before the check. The frame is one buffer:
                // the program is loaded without BPF_F_XDP_HAS_FRAGS, so
                // a driver gives it only frames that fit one.
                guards ["RxL3ICMPValidChecksum: ip.len <= 1500"]
                // The transport checksums sum the whole datagram: up to
                // 65,507 bytes, a loop the verifier must prove bounded
                // within its 1,000,000 processed instructions
                // (BPF_COMPLEXITY_LIMIT_INSNS, include/linux/bpf.h), and
                // bpf_csum_diff sums at most 512 bytes a call
                // (net/core/filter.c). They, and what comes after them
                // (demultiplexing, delivery, the answers), stay in the
                // generated Go.
                limits [
                    "RxL4UDPValidChecksum: sums the whole datagram (up to 65,507 bytes): beyond what the verifier bounds"
                    "RxL4TCPValidUnicastDest: TCP is the kernel's; the stage hands it on"
                ]
            }
            port out[CFlow]
        }

        // Exact 5-tuples of connected flows: a hash map keyed by source
        // and destination address and port and the protocol.
        config CFlow {
            table {
                fields [ip.proto ip.src ip.dst l4.sport l4.dport]
                capacity 65536
            }
            port queues[Queue0..63]
            port default[CPort]
        }

        // Listeners: hash maps keyed by protocol, destination address
        // and destination port, the address left out (wildcard) for a
        // listener on every address. dragonc run makes one hash map per
        // shape of key and looks them up in priority order, higher
        // first (run/stage.go, groups): the embedder gives an
        // address-specific listener's rule a higher priority than a
        // wildcard one (embed's endpoint priorities), so the more
        // specific rule wins, as the LPG's demultiplexing does.
        config CPort {
            table {
                fields [ip.proto ip.dst l4.dport]
                wildcard [ip.dst]
                capacity 65536
                priority 1..7
            }
            port queues[Queue0..63]
            port default[CRSS]
        }

        // What no rule claims: the Toeplitz hash of the addresses and
        // ports (RSS's, Microsoft's "Verifying the RSS Hash Calculation"
        // key, prg's default) picks one of 128 buckets, each naming a
        // loop: the program computes it from a per-byte table (package
        // run, the RSS map). It spreads a listener's flows over loops and
        // keeps each flow on one; frames it cannot hash (not IPv4, or a
        // header that does not fit) go to Queue0.
        config CRSS {
            hash {
                fields [ip.src ip.dst l4.sport l4.dport]
                buckets 128
                ports [tcp udp]
            }
            port queues[Queue0..63]
            port default[Queue0]
        }

        // The receive loops; software polls them.
        node Queue0..63 {
            attr "source"
            port out[]
        }
    }
}

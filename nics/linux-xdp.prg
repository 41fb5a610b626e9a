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
// program sees a frame, and a software link has none, so no CRC node here.
graph linux_xdp {
    resources Device {
        stage "ebpf" // built by dragonc run, not configured through a driver
        rx_queues 64
        tx_queues 64
    }

    cluster Rx {
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

        // Listeners: a hash map keyed by protocol and destination port.
        config CPort {
            table {
                fields [ip.proto l4.dport]
                capacity 65536
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

// Intel 82599 10 GbE controller (Linux driver ixgbe): the receive path.
//
// Sources. docs/nics.md (facts gathered for dragonc), which summarises the
// Intel 82599 10 GbE Controller Datasheet rev. 2.6 (cited as [17] by the
// Dragonet paper, Shinde et al., "We need to talk about NICs"); the Intel Ethernet adapter
// user guide for ixgbe's ethtool interface (flow director rules, UDP RSS
// off by default). Facts marked as assumptions are kept as docs/nics.md asks and
// are easy to change here.
//
// Precedence of receive steering (docs/nics.md): filters (5-tuple, then flow
// director), then RSS, then the default queue 0. Where the ethertype and
// SYN filters sit is an assumption taken from the sibling Intel I210
// datasheet, Fig. 7-5 (ethertype, then SYN, then the tuple filters); the
// 82599 datasheet's own receive-queue figure was not checked here.
graph i82599 {
    resources Device {
        driver "ixgbe" // the Linux driver; what it exposes: nics/drivers.go
        rx_queues 128 // docs/nics.md: 128 receive queues
        tx_queues 128 // docs/nics.md: 128 transmit queues
        // MSI-X vectors: IXGBE_MAX_MSIX_VECTORS_82599 = 0x40, the bound
        // ixgbe_get_pcie_msix_count_generic() puts on the table size read
        // from PCIe config space (ixgbe_type.h, ixgbe_common.c).
        vectors 64
        link_gbps 10
    }

    cluster Rx {
        // The MAC drops frames with a bad CRC and runts before any queue
        // sees them (IEEE 802.3 minimum: 64 bytes with FCS, 60 without).
        boolean L2EtherValidCRC {
            cost ns 0
            port true[L2EtherValidLength]
            port false[]
            predicate true "frame.crc_ok"
        }

        boolean L2EtherValidLength {
            port true[CsumOffload]
            port false[]
            predicate true "eth.len_ok"
        }

        // Receive checksum offload (docs/nics.md: IPv4, TCP and UDP). When on,
        // the verdicts are written into the receive descriptor: the nodes
        // below are side branches marked "software" because software reads
        // their result instead of recomputing it.
        config CsumOffload {
            enum { feature rx_checksum }
            port on[L3IPv4ValidChecksum L4UDPValidChecksum L4TCPValidChecksum CEtherTypeFilter]
            port off[CEtherTypeFilter]
        }

        boolean L3IPv4ValidChecksum {
            attr "software"
            port true false[]
            predicate true "ip.csum_ok"
        }

        boolean L4UDPValidChecksum {
            attr "software"
            port true false[]
            predicate true "udp.csum_ok"
        }

        boolean L4TCPValidChecksum {
            attr "software"
            port true false[]
            predicate true "tcp.csum_ok"
        }

        // Ethertype filters: 8 (ixgbe_type.h: IXGBE_MAX_ETQF_FILTERS = 8;
        // the queue is in ETQS, IXGBE_ETQS_RX_QUEUE, 7 bits).
        config CEtherTypeFilter {
            table {
                fields [eth.type]
                capacity 8
            }
            port queues[Queue0..127]
            port default[CSynFilter]
        }

        // SYN filter: 1 (one SYNQF register, ixgbe_type.h IXGBE_SYNQF),
        // steers TCP SYN segments to one queue.
        config CSynFilter {
            table {
                fields []
                capacity 1
                when "ip.proto == tcp && tcp.flags & 0x12 == 0x02"
            }
            port queues[Queue0..127]
            port default[C5TupleFilter]
        }

        // 5-tuple filters: 128 entries, priority 1..7; each of source and
        // destination address, protocol, source and destination port can
        // be compared or ignored; the action is a queue (docs/nics.md;
        // ixgbe_type.h: IXGBE_MAX_FTQF_FILTERS = 128).
        config C5TupleFilter {
            table {
                fields [ip.proto ip.src ip.dst l4.sport l4.dport]
                wildcard [ip.proto ip.src ip.dst l4.sport l4.dport]
                capacity 128
                priority 1..7
            }
            port queues[Queue0..127]
            port default[CFDir]
        }

        // Flow director perfect filters: 8K - 2 usable with a 256 KB packet
        // buffer split; all perfect filters share one global mask; the
        // action is a queue or drop (docs/nics.md). ethtool must supply the same
        // fields and masks for every rule (adapter user guide).
        config CFDir {
            table {
                fields [ip.proto ip.src ip.dst l4.sport l4.dport]
                masks [ip.src ip.dst l4.sport l4.dport]
                global_mask true
                capacity 8190
                drop true
            }
            port queues[Queue0..127]
            port default[CRSS]
        }

        // RSS: a 128-entry redirection table of 4-bit entries, so up to 16
        // queues; 40-byte key (docs/nics.md). TCP ports are hashed by default;
        // UDP ports once `ethtool -N IF rx-flow-hash udp4 sdfn` turns them
        // on, which linux.sh does (adapter user guide: off by default).
        // Fragments hash on addresses only (82598 datasheet, RSS section).
        config CRSS {
            hash {
                fields [ip.src ip.dst l4.sport l4.dport]
                buckets 128
                max_targets 16
                ports [tcp udp]
            }
            port queues[Queue0..15]
            port default[Queue0]
        }

        // Receive queues; software polls them, so they are sources of the
        // software graphs.
        node Queue0..127 {
            attr "source"
            port out[]
        }
    }

    // Transmit: checksum insertion for IPv4, TCP and UDP (the datasheet's
    // transmit offloads; docs/nics.md lists the receive side). Software hands
    // frames to a transmit queue; with insertion on, the NIC fills the
    // checksums, so the LPG's fill-checksum nodes run in hardware.
    cluster Tx {
        node Queue0..127 { // docs/nics.md: 128 transmit queues
            attr "source"
            port out[CsumInsert]
        }

        config CsumInsert {
            enum { feature tx_checksum }
            port on[L3IPv4FillChecksum]
            port off[Wire]
        }

        // Each fills its checksum in frames of its kind and passes the
        // rest; the names are the LPG's, so each stands for the LPG node of
        // that name (docs/nics.md: IPv4 header, UDP and TCP insertion).
        node L3IPv4FillChecksum {
            port out[L4UDPFillChecksum]
        }

        node L4UDPFillChecksum {
            port out[L4TCPFillChecksum]
        }

        node L4TCPFillChecksum {
            port out[Wire]
        }

        node Wire {
            attr "sink"
        }
    }
}

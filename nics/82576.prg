// Intel 82576 1 GbE controller (Linux driver igb): the receive path, the
// NIC of the Dragonet paper's Fig. 2 (Shinde et al., "We need to talk about NICs"): Ethernet
// checks, IPv4 classification and checksum, filters, RSS to queues.
//
// Sources. docs/nics.md, which summarises the Intel 82576 Gigabit Ethernet
// Controller Datasheet rev. 2.61 (the paper's [16]); the filter counts and
// field widths of the 82576 as Intel's DPDK igb driver programs them
// (drivers/net/e1000/e1000_ethdev.h, igb_ethdev.c; "DPDK" below). The order
// of the filters (ethertype, SYN, tuple filters, RSS, default queue) is an
// assumption taken from Fig. 7-5 of the sibling I210 datasheet.
graph i82576 {
    resources Device {
        driver "igb" // the Linux driver; what it exposes: nics/drivers.go
        // 82576EB datasheet rev. 2.63, product features: "16 TX queues and
        // 16 RX queues" per port; DPDK IGB_MAX_RX_QUEUE_NUM_82576 = 16.
        rx_queues 16
        tx_queues 16
        // MSI-X vectors: an assumption (the datasheet's figure was not
        // checked here). Linux's igb requests at most MAX_MSIX_ENTRIES = 10
        // (igb.h: 8 queue vectors and one for other causes).
        vectors 25
        link_gbps 1
    }

    cluster Rx {
        boolean L2EtherValidCRC {
            port true[L2EtherValidLength]
            port false[]
            predicate true "frame.crc_ok"
        }

        boolean L2EtherValidLength {
            port true[CsumOffload]
            port false[]
            predicate true "eth.len_ok"
        }

        // Receive checksum offload: IPv4 header, TCP and UDP; the verdict is
        // a flag in the receive descriptor that software reads (docs/nics.md).
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

        // Ethertype filters: 8 (DPDK: E1000_MAX_ETQF_FILTERS = 8, accepted
        // for the 82576 by MAC_TYPE_FILTER_SUP). The queue field of ETQF is
        // 3 bits (E1000_ETQF_QUEUE = 0x00070000): queues 0..7 only.
        config CEtherTypeFilter {
            table {
                fields [eth.type]
                capacity 8
            }
            port queues[Queue0..7]
            port default[CSynFilter]
        }

        // SYN filter: 1, steers TCP SYN to one queue (docs/nics.md); its
        // queue field is 3 bits (DPDK: E1000_SYN_FILTER_QUEUE = 0x0E).
        config CSynFilter {
            table {
                fields []
                capacity 1
                when "ip.proto == tcp && tcp.flags & 0x12 == 0x02"
            }
            port queues[Queue0..7]
            port default[C5TupleFilter]
        }

        // No flex filters: the 82576's flexible filters are wake-up filters.
        // Steering them to a queue (WUFC.FLEX_HQ, the FHFT queueing field)
        // came with the 82580: DPDK accepts flex filters only for the
        // 82580, I350, I210 and I211 (MAC_TYPE_FILTER_SUP_EXT), not for the
        // 82576.

        // Five-tuple queue filters: 8 (DPDK: E1000_MAX_FTQF_FILTERS = 8,
        // igb_add_5tuple_filter_82576); priority 3 bits (E1000_IMIR_PRIORITY).
        config C5TupleFilter {
            table {
                fields [ip.proto ip.src ip.dst l4.sport l4.dport]
                wildcard [ip.proto ip.src ip.dst l4.sport l4.dport]
                capacity 8
                priority 1..7
            }
            port queues[Queue0..15]
            port default[CRSS]
        }

        // RSS over IPv4/TCP/UDP, 128-entry redirection table indexed by the
        // low 7 bits of the hash (docs/nics.md, documented for the 82575).
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

        node Queue0..15 {
            attr "source"
            port out[]
        }
    }

    // Transmit: checksum insertion for IPv4, TCP and UDP (the datasheet's
    // transmit offloads; docs/nics.md lists the receive side). Software hands
    // frames to a transmit queue; with insertion on, the NIC fills the
    // checksums, so the LPG's fill-checksum nodes run in hardware.
    cluster Tx {
        node Queue0..15 { // 16 transmit queues (82576EB datasheet, product features)
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

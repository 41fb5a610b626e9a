// Intel 82576 1 GbE controller (Linux driver igb): the receive path, the
// NIC of the Dragonet paper's Fig. 2 (Shinde et al., "We need to talk about NICs"): Ethernet
// checks, IPv4 classification and checksum, filters, RSS to queues.
//
// Sources. docs/nics.md, which summarises the Intel 82576 Gigabit Ethernet
// Controller Datasheet rev. 2.61 (the paper's [16]); the order of the
// filters follows Fig. 7-5 of the sibling I210 datasheet (ethertype, SYN,
// flex, tuple filters, RSS, default queue): unverified for the 82576.
graph i82576 {
    resources Device {
        driver "igb" // the Linux driver; what it exposes: nics/drivers.go
        rx_queues 16 // docs/nics.md
        tx_queues 16 // docs/nics.md (unverified)
        vectors 25 // MSI-X vectors (82576 datasheet; unverified)
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

        // Ethertype filters: 8 (docs/nics.md).
        config CEtherTypeFilter {
            table {
                fields [eth.type]
                capacity 8
            }
            port queues[Queue0..15]
            port default[CSynFilter]
        }

        // SYN filter: 1, steers TCP SYN to one queue (docs/nics.md).
        config CSynFilter {
            table {
                fields []
                capacity 1
                when "ip.proto == tcp && tcp.flags & 0x12 == 0x02"
            }
            port queues[Queue0..15]
            port default[CFlexFilter]
        }

        // Flex filters: 8, each matching up to 128 bytes at the start of the
        // frame with a byte mask (docs/nics.md). Every field of the vocabulary
        // lies in the first 128 bytes, so an entry may match and mask any
        // of them.
        config CFlexFilter {
            table {
                fields [eth.type vlan.id ip.proto ip.src ip.dst l4.sport l4.dport omx.dst_ep]
                masks [eth.type vlan.id ip.proto ip.src ip.dst l4.sport l4.dport omx.dst_ep]
                capacity 8
            }
            port queues[Queue0..15]
            port default[C5TupleFilter]
        }

        // 2-tuple/5-tuple queue filters: 8 (docs/nics.md; unverified).
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
        node Queue0..15 { // docs/nics.md: 16 transmit queues (unverified)
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

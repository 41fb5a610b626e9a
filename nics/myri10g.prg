// Myricom Myri-10G (Linux driver myri10ge) with the Open-MX firmware mode:
// the receive path.
//
// Sources. docs/nics.md; the Open-MX paper (Goglin, "NIC-assisted Cache-Efficient Receive Stack for Message Passing over Ethernet"): the
// firmware can hash Open-MX frames (EtherType 0x86DF) by their 8-bit
// destination endpoint so that every frame of one endpoint lands in one
// slice, and the driver tells the library which interrupt serves each
// endpoint.
graph myri10g {
    resources Device {
        driver "myri10ge" // the Linux driver; what it exposes: nics/drivers.go
        // Slices, each a receive ring: the driver allocates at most
        // MYRI10GE_MAX_SLICES = 32 (myri10ge.c, alloc_etherdev_mq in
        // myri10ge_probe); the firmware reports its own bound
        // (MXGEFW_CMD_GET_MAX_RSS_QUEUES, myri10ge_probe_slices), not
        // published: 32 assumes it does not bind tighter.
        rx_queues 32
        vectors 32 // one MSI-X vector per slice (myri10ge_request_irq)
        link_gbps 10
    }

    cluster Rx {
        boolean L2EtherValidCRC {
            port true[L2EtherValidLength]
            port false[]
            predicate true "frame.crc_ok"
        }

        boolean L2EtherValidLength {
            port true[Classify]
            port false[]
            predicate true "eth.len_ok"
        }

        node Classify {
            port openmx[OMXHashMode]
            port other[CIPHash]
            predicate openmx "eth.type == openmx"
        }

        // The Open-MX endpoint hashing of the paper is a firmware switch.
        // Off, Open-MX frames are not IP and fall to slice 0.
        config OMXHashMode {
            enum { feature openmx_hash }
            port off[CIPHash]
            port on[COMXHash]
        }

        // Endpoint hashing: the destination endpoint byte selects a bucket,
        // and the driver's table maps buckets to slices.
        config COMXHash {
            hash {
                fields [omx.dst_ep]
                algorithm identity
                buckets 256
                max_targets 32
            }
            port queues[Queue0..31]
            port default[Queue0]
        }

        // The firmware's RSS hash. The Linux driver cannot change it once
        // loaded: myri10ge_open() sends MXGEFW_CMD_SET_RSS_ENABLE with
        // data1 = the module parameter myri10ge_rss_hash (0444), whose
        // default is MXGEFW_RSS_HASH_TYPE_SRC_DST_PORT (5, myri10ge.c;
        // myri10ge_mcp.h "5: source port + destination port"). That hash
        // is the low byte of the destination port plus the low byte of the
        // source port (algorithm port_sum, internal/packet.PortSum, after
        // Myricom's host mirror of it in the illumos myri10ge driver,
        // myri10ge_simple_send_hash); it reads no address. Frames that are
        // not TCP or UDP are not hashed and go to slice 0 (the same mirror
        // sends them there; the firmware's choice is not published, an
        // assumption). buckets 32: MYRI10GE_MAX_SLICES (myri10ge.c), the
        // driver's identity table i -> slice i (myri10ge_open) is a bucket
        // mask for the power-of-two slice counts the driver uses.
        config CIPHash {
            hash {
                fields [l4.sport l4.dport]
                algorithm port_sum
                buckets 32
                max_targets 32
                ports [tcp udp]
            }
            port queues[Queue0..31]
            port default[Queue0]
        }

        node Queue0..31 {
            attr "source"
            port out[]
        }
    }
}

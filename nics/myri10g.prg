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
        rx_queues 32 // docs/nics.md: up to 32 slices, each a receive ring
        vectors 32 // docs/nics.md: one MSI-X interrupt per slice
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

        // Firmware IP hashing over addresses and ports (docs/nics.md: Toeplitz or
        // port-based per firmware; modelled as Toeplitz).
        config CIPHash {
            hash {
                fields [ip.src ip.dst l4.sport l4.dport]
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

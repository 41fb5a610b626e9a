// M-VIA: VIA in software over Fast Ethernet. A kernel agent layered on the
// Ethernet driver gives each connection a Virtual Interface (descriptor
// queues, registered memory, a completion queue) and carries its messages
// as Ethernet frames of their own type. Without doorbells in the adapter
// there is no zero copy (SOVIA paper, section 3.1). dragonc's software VI
// (package sovia, EtherType 0x88B5) is a provider of this kind, and
// `dragonc run` serves it.
//
// Sources. The SOVIA paper (Kim, Kim, Jung, "Building a High Performance
// Communication Layer Over Virtual Interface Architecture on Linux
// Clusters"): the platform of section 3.1 (M-VIA 1.0 on an Intel
// EtherExpress 10/100), Table 1 (M-VIA's features), Table 2 (latency by
// message size), the figures quoted in sections 4.1 and 5 and Table 5.
//
// dragonc reads the engine below to decide, per stream endpoint, whether
// it travels over a VI (the SOVIA layer) or kernel TCP, and how SOVIA
// sends (docs/sovia.md). The IP receive path is the EtherExpress's: one
// ring, no steering and no checksum offload.
graph mvia {
    resources Device {
        driver "e100" // Intel EtherExpress 10/100 (section 3.1); what it exposes: nics/drivers.go
        rx_queues 1 // one receive ring (nics/drivers.go, e100)
        link_gbps 0.1 // Fast Ethernet
    }

    engine VIA {
        kind "via"
        provider "M-VIA 1.0" // SOVIA paper, section 3.1
        // dragonc's software VI numbers VIs with 16 bits and keeps VI 0
        // for connection setup (sovia/rawvi.go).
        vis 65535
        max_transfer 32768B // Table 1: MaxTransferSize
        rdma_write 0 // Table 1
        completion_queues 1 // Table 1
        zero_copy 0 // section 3.1: no doorbells in Fast Ethernet adapters
        tcp_latency 75.6us // section 4.1: kernel TCP, 4-byte messages
        via_mbps 96 // section 6: SOVIA's peak on M-VIA, a lower bound for native VIA
        tcp_mbps 88 // Table 5: FTP over TCP/IP on Fast Ethernet
        // Table 2: one-way latency in microseconds by message size, as
        // [size native SOVIA_REG SOVIA_COPY SOVIA_HYBRID].
        latency [
            [4B      43.3   57.6   45.1   45.0]
            [8B      43.4   57.9   45.4   45.4]
            [16B     43.4   58.0   45.4   45.4]
            [32B     44.2   58.8   46.0   45.9]
            [64B     49.1   63.9   51.2   51.2]
            [128B    60.3   75.5   62.9   62.9]
            [256B    81.5   97.5   84.7   84.7]
            [512B   123.1  140.7  127.7  127.8]
            [1KiB   206.3  227.9  213.5  213.9]
            [2KiB   330.3  354.5  339.3  339.6]
            [4KiB   506.8  539.3  526.3  539.4]
            [8KiB   859.0  912.7  915.0  912.4]
            [16KiB 1545.3 1632.5 1660.7 1632.2]
            [32KiB 2910.2 3053.7 3135.6 3053.4]
        ]
    }

    cluster Rx {
        boolean L2EtherValidCRC {
            port true[Queue0]
            port false[]
            predicate true "frame.crc_ok"
        }

        node Queue0 {
            attr "source"
            port out[]
        }
    }
}

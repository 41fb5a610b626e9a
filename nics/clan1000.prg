// Giganet cLAN1000: VIA in hardware. Every connection may have a Virtual
// Interface of its own (a send and a receive queue of descriptors in user
// memory, doorbells, a completion queue); the adapter moves messages
// between registered buffers with no copy and no system call. IP runs
// beside the VIs through Giganet's LANE driver, which emulates an
// Ethernet interface over VIA.
//
// Sources. The SOVIA paper (Kim, Kim, Jung, "Building a High Performance
// Communication Layer Over Virtual Interface Architecture on Linux
// Clusters"): the platform of section 3.1, Table 1 (cLAN's features),
// Table 3 (latency by message size), the figures quoted in sections 4.1,
// 4.2 and 5; the VIA 1.0 specification's NIC attributes as VipQueryNic
// reports them (vipl.h, VIP_NIC_ATTRIBUTES).
//
// dragonc reads the engine below to decide, per stream endpoint, whether
// it travels over a VI (the SOVIA layer) or kernel TCP, and how SOVIA
// sends (docs/sovia.md). The receive path is LANE's: one ring, no
// steering and no checksum offload.
graph clan1000 {
    resources Device {
        driver "clan" // Giganet's own driver, with LANE; what it exposes: nics/drivers.go
        rx_queues 1 // LANE presents one emulated Ethernet interface (SOVIA paper, section 2.4)
        link_gbps 1.25 // cLAN1000: 1.25 Gb/s links; native VIA peaks at 815 Mb/s (SOVIA paper, section 5)
    }

    engine VIA {
        kind "via"
        provider "Giganet cLAN 1.1.1" // SOVIA paper, section 3.1
        // VIA leaves the number of VIs to the adapter (VipQueryNic, MaxVI).
        // The paper does not give cLAN's; 1024 is assumed: set your card's.
        vis 1024
        max_transfer 65486B // Table 1: MaxTransferSize
        rdma_write 1 // Table 1: cLAN supports RDMA Write
        completion_queues 1 // Table 1
        zero_copy 1 // section 3.1: hardware doorbells; the OS is not on the data path (section 4.3)
        tcp_latency 54.9us // section 4.1: TCP through LANE, 4-byte messages
        via_mbps 815 // section 5: native VIA's peak bandwidth
        tcp_mbps 450 // section 4.2: TCP through LANE, 32 KB messages
        // Table 3: one-way latency in microseconds by message size, as
        // [size native SOVIA_REG SOVIA_COPY SOVIA_HYBRID].
        latency [
            [4B      8.3  12.3  10.5  10.5]
            [8B      8.3  12.6  10.6  10.7]
            [16B     8.4  12.6  10.8  10.8]
            [32B    10.1  14.3  12.5  12.5]
            [64B    10.1  14.5  12.8  12.8]
            [128B   10.5  15.5  14.0  14.0]
            [256B   11.9  17.3  16.0  16.0]
            [512B   14.9  20.5  19.7  19.7]
            [1KiB   20.2  26.4  26.5  26.5]
            [2KiB   30.4  39.5  40.7  40.8]
            [4KiB   50.5  65.3  74.2  65.0]
            [8KiB   90.6 123.4 160.1 123.0]
            [16KiB 169.9 240.7 307.7 240.3]
            [32KiB 329.0 461.1 603.2 460.6]
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

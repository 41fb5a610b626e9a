// Alteon Tigon programmable 1 GbE controller (3Com 710024): two firmware
// cores and the event handlers they run.
//
// Sources. docs/nics.md; the Tigon paper (Kim, Pai and Rixner, "Exploiting Task-level Concurrency in a Programmable Network Interface"): two MIPS
// R4000-class cores at 88 MHz with private scratch pads of 16 KB (CPU A) and
// 8 KB (CPU B), 1 MB of shared SRAM, one hardware semaphore, an event
// register per core; handlers run to completion. The released firmware does
// no checksum offload (a hardware bug), so the receive path has no checksum
// nodes.
//
// Handler costs. Fig. 5 of the paper (section 4.2) gives each handler's
// share of the firmware's time for bidirectional minimum-size UDP: Send
// Data Ready and Receive Complete about 30 % each, DMA Read Complete 14 %
// (over twice DMA Write Complete), Update Send Consumer 0.6 %, each other
// handler 4-6 %. The model reads those five at the middle of the band,
// 5 %, as the profile gives them: they are not fitted to the partition's
// split (the paper reports 53 % / 47 %; these shares give 54.8 % / 45.2 %
// of the 99.6 % total). Absolute cycles: one 88 MHz core is
// saturated by 938 Mb/s of bidirectional maximum-size frames (the paper, section
// 3), about 38,600 frames each way per second, so a send plus a receive
// costs about 88e6 / 38,600 = 2,280 cycles; each handler's cycles are its
// share of that. Code sizes: the paper gives only the total (about 21 KB,
// more than CPU A's 16 KB scratch pad, less than both pads together, with
// the published partition fitting both); the per-handler sizes below are
// chosen to meet those facts, the two receive/send data handlers largest.
// Both are derived estimates.
graph tigon {
    resources Device {
        driver "acenic" // the Linux driver; what it exposes: nics/drivers.go
        rx_queues 4 // host receive rings the firmware can return frames to (an assumption; docs/nics.md)
        link_gbps 1
        sram_kib 1024 // Tigon paper: 1 MB shared external SRAM
        semaphores 1 // Tigon paper: one hardware semaphore
        pair_cycles 2280 // derived above: cycles for one send plus one receive
    }

    engine CpuA {
        kind "nic-core"
        clock 88MHz // Tigon paper, section 3
        scratchpad 16KiB // Tigon paper, section 4
    }

    engine CpuB {
        kind "nic-core"
        clock 88MHz // Tigon paper, section 3
        scratchpad 8KiB // Tigon paper, section 4
    }

    // Event handlers (the paper's Table 1) with their share of time (Fig. 5),
    // code size, and what they share (the paper's Table 2): data (ring indices) and
    // the explicitly managed DMA channels. The MAC receive and transmit
    // channels are used by one handler each and shared with none.
    task Mailbox {
        percent 5
        code 1.5KiB
        data [DriverSendProducer DriverRecvProducer]
    }

    task SendBDReady {
        percent 5
        code 0.8KiB
        data [DriverSendProducer]
        channels [DMARead]
    }

    task DMAReadComplete {
        percent 14
        code 2.0KiB
        data [FirmwareSendProducer FirmwareSendConsumer FirmwareRecvProducer]
        channels [DMARead]
    }

    task SendDataReady {
        percent 30
        code 3.5KiB
        data [FirmwareSendProducer]
        channels [DMARead MACTransmit]
    }

    // Changed as in the paper: the host reads the consumer index over MMIO,
    // so this handler no longer needs the DMA write channel.
    task UpdateSendConsumer {
        percent 0.6
        code 0.3KiB
        data [FirmwareSendConsumer]
    }

    task RecvBDReady {
        percent 5
        code 0.8KiB
        data [DriverRecvProducer]
        channels [DMARead]
    }

    task ReceiveComplete {
        percent 30
        code 9.5KiB
        data [FirmwareRecvProducer FirmwareReturnProducer]
        channels [DMAWrite MACReceive]
    }

    task UpdateRecvReturnProducer {
        percent 5
        code 1.4KiB
        data [FirmwareReturnProducer]
        channels [DMAWrite]
    }

    task DMAWriteComplete {
        percent 5
        code 1.2KiB
        channels [DMAWrite]
    }

    // UDP/TCP demultiplexing moved into the firmware: a lookup of the
    // destination port that picks the host ring. Its cost per frame is an
    // estimate (a hash probe in scratch pad memory, about 150 cycles at
    // one instruction a cycle); its load follows the stack's packet rate.
    task FirmwareDemux {
        cycles_per_packet 150
        code 1.0KiB
        data [FirmwareReturnProducer]
        tables [RxFirmwareSteer] // it runs while this table steers
    }

    cluster Rx {
        boolean L2EtherValidCRC {
            port true[L2EtherValidLength]
            port false[]
            predicate true "frame.crc_ok"
        }

        boolean L2EtherValidLength {
            port true[Firmware]
            port false[]
            predicate true "eth.len_ok"
        }

        // Which core runs which handler: the configuration the embedder
        // searches (the place kind).
        config Firmware {
            place { tasks handler }
            port out[FirmwareSteer]
        }

        // Firmware steering into host rings (task FirmwareDemux).
        config FirmwareSteer {
            table {
                fields [ip.proto ip.dst l4.dport]
                wildcard [ip.dst]
                capacity 64
            }
            port queues[Queue0..3]
            port default[Queue0]
        }

        node Queue0..3 {
            attr "source"
            port out[]
        }
    }
}

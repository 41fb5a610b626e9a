// Intel I/OAT copy engine: an asynchronous memory-to-memory DMA engine on
// the host platform (not on the packet path). dragonc uses it to decide,
// per endpoint, whether large copies (Open-MX pull messages) go to the
// engine or stay on the CPU.
//
// Sources. docs/nics.md; the I/OAT paper (Vaidyanathan et al., "Designing Efficient Asynchronous Memory Operations Using Hardware Copy Engine: A Case Study with I/OAT"): 1 and 4
// channels measured; for buffers in cache the CPU copy always wins; with a
// cold cache 4 channels win from 16 KB and 1 channel from 256 KB;
// bandwidth beyond 1 MB: CPU 1443 MB/s, I/OAT 2912 MB/s (4 channels) and
// 2048 MB/s (1 channel); computation overlaps the copy up to 87 % (4
// channels) and 92 % (1 channel); page pinning is about 30 % of the cost of
// a large copy and starting the DMA about 7 %.
graph ioat {
    resources Device {
        rx_queues 0
    }

    engine IOAT {
        kind "copy"
        channels 4 // the paper measured 1 and 4 channels
        bandwidth_mbs 2912 // I/OAT paper: 4 channels, beyond 1 MB
        bandwidth_1ch_mbs 2048 // I/OAT paper: 1 channel, beyond 1 MB
        cpu_bandwidth_mbs 1443 // I/OAT paper: CPU copy beyond 1 MB
        crossover_4ch_kib 16 // I/OAT paper: cold cache, 4 channels win from 16 KB
        crossover_1ch_kib 256 // I/OAT paper: cold cache, 1 channel wins from 256 KB
        // I/OAT paper, Fig. 9b (section 4.5): for inter-process copies the
        // CPU's kernel-assisted copy beats the engine up to 256 KB; beyond
        // 1 MB the engine wins (2932 against 1438 MB/s).
        crossover_ipc_kib 256
        overlap_4ch_percent 87 // the I/OAT paper
        overlap_1ch_percent 92 // the I/OAT paper
        pin_percent 30 // I/OAT paper: page pinning share of a large copy
        start_percent 7 // I/OAT paper: DMA start share
    }

    // The engine is reached by copy requests, not by packets.
    node Copy {
        attr "sink"
    }
}

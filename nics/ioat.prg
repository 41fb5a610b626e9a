// Intel I/OAT copy engine: an asynchronous memory-to-memory DMA engine on
// the host platform (not on the packet path). dragonc uses it to decide,
// per endpoint, whether large copies (Open-MX pull messages) go to the
// engine or stay on the CPU.
//
// Sources. NICS.md; the I/OAT seed (001_9198830e3d345322.txt): 1 and 4
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
        channels 4 // the seed measured 1 and 4 channels
        bandwidth_mbs 2912 // seed: 4 channels, beyond 1 MB
        bandwidth_1ch_mbs 2048 // seed: 1 channel, beyond 1 MB
        cpu_bandwidth_mbs 1443 // seed: CPU copy beyond 1 MB
        crossover_4ch_kib 16 // seed: cold cache, 4 channels win from 16 KB
        crossover_1ch_kib 256 // seed: cold cache, 1 channel wins from 256 KB
        overlap_4ch_percent 87 // seed
        overlap_1ch_percent 92 // seed
        pin_percent 30 // seed: page pinning share of a large copy
        start_percent 7 // seed: DMA start share
    }

    // The engine is reached by copy requests, not by packets.
    node Copy {
        attr "sink"
    }
}

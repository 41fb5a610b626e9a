// dragonc extensions inside the Unicorn grammar: match predicates, costs,
// configuration kinds and graph-level resources.
graph extensions {
    engine CpuA {
        kind "nic-core"
        clock 88MHz // the Tigon paper: cores run at 88 MHz
        scratchpad 16KiB
    }

    node Classify {
        cost cycles 40
        port dns[Filter]
        port other[Filter]
        predicate dns "udp.dport == 53 && ip.dst in 10.0.0.0/24"
        predicate other "!(udp.dport == 53 && ip.dst in 10.0.0.0/24)"
    }

    config Filter {
        table {
            fields [ip.src ip.dst ip.proto l4.sport l4.dport]
            capacity 128
            priority 1..7
        }
        port queues[Q0 Q1]
        port default[Q0]
    }

    node Q0 { attr "source" port out[] }
    node Q1 { attr "source" port out[] }
}

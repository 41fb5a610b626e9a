graph nic {
    config C {
        table { fields [l4.dport] capacity 0 }
        port out[]
    }
}

graph nic {
    node Plain {
        attr "source"
        port out[]
    }
    engine Core {
        clock 1GHz
    }
    task Handler {
        engine Core
        tables [Plain]
    }
}

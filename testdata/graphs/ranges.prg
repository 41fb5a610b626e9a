// Numbered ranges (a dragonc extension): Queue0..3 declares Queue0 to
// Queue3, and a port list may name the same range.
graph ranges {
    node Steer {
        port queues[Queue0..3]
        port default[Queue0]
    }
    node Queue0..3 {
        attr "source"
        port out[]
    }
}

// Names with letters outside ASCII. Each error is at the letter, and its
// column counts characters: on line 6 the "ä" before it is two bytes but
// one column. Participle alone reported the first at the word "node".
graph g {
    node Émetteur { port out[] }
    node Rx { attr "Empfänger" port out[RxPrüfsumme] }
}

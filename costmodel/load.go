package costmodel

// QueueLoads is the load the cost functions see on each queue of p
// (indexed as p.Queues) under assignment a: every endpoint's weight (its
// rate when every endpoint declares one, else 1, a flow, as Dragonet
// counts) times its share there. ByRate says which weight it was.
func QueueLoads(p *Problem, a Assignment) (load []float64, byRate bool) {
	w := weights(p)
	byRate = len(p.Endpoints) > 0
	for _, e := range p.Endpoints {
		if e.Rate <= 0 {
			byRate = false
		}
	}
	return loads(p, a, w, nil), byRate
}

// Assignment is a copy of the evaluator's current assignment.
func (ev *Evaluator) Assignment() Assignment {
	a := make(Assignment, len(ev.shares))
	for i, s := range ev.shares {
		a[i] = append([]Share(nil), s...)
	}
	return a
}

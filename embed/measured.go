package embed

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/lpg"
)

// PredictedLoad is what a plan predicts of the traffic: each endpoint's
// rate and the queues its frames land on, and each queue's load as the
// cost function sees it (costmodel.QueueLoads over the search's
// assignment). dragonc run sets it beside what it measures.
type PredictedLoad struct {
	// ByRate: the loads are the declared rates (every endpoint declares
	// one); otherwise each endpoint weighs one flow, as the cost
	// functions count then.
	ByRate    bool
	Endpoints []PredictedEndpoint // in the stack's order
	Queues    []PredictedQueue    // the queues the search could use, by ID
}

// PredictedEndpoint is an endpoint's declared rate (0 when it declares
// none) and the share of its frames each queue gets.
type PredictedEndpoint struct {
	Name   string
	Rate   float64
	Shares []QueueShare
}

// QueueShare is a fraction of an endpoint's frames on a queue (by ID).
type QueueShare struct {
	Queue int
	Frac  float64
}

// PredictedQueue is a queue's predicted load (in the weights ByRate
// names) and its share of all the endpoints' load.
type PredictedQueue struct {
	Queue int
	Load  float64
	Share float64
}

// PredictedLoad reads the plan's prediction off the search's assignment.
func (r *Result) PredictedLoad() PredictedLoad {
	return predictedLoad(r.p.cp, r.state.ev.Assignment())
}

// predictedLoad is the prediction of the assignment a of problem cp.
func predictedLoad(cp *costmodel.Problem, a costmodel.Assignment) PredictedLoad {
	loads, byRate := costmodel.QueueLoads(cp, a)
	out := PredictedLoad{ByRate: byRate}
	var total float64
	for _, l := range loads {
		total += l
	}
	for qi, q := range cp.Queues {
		pq := PredictedQueue{Queue: q.ID, Load: loads[qi]}
		if total > 0 {
			pq.Share = loads[qi] / total
		}
		out.Queues = append(out.Queues, pq)
	}
	for i, e := range cp.Endpoints {
		pe := PredictedEndpoint{Name: e.Name, Rate: e.Rate}
		for _, s := range a[i] {
			if s.Frac > 0 {
				pe.Shares = append(pe.Shares, QueueShare{Queue: cp.Queues[s.Queue].ID, Frac: s.Frac})
			}
		}
		slices.SortFunc(pe.Shares, func(x, y QueueShare) int { return x.Queue - y.Queue })
		out.Endpoints = append(out.Endpoints, pe)
	}
	return out
}

// CostAtRates is the cost of r's plan (the same assignment) when the
// endpoints' rates are rates (packets a second, by endpoint name; an
// endpoint not named keeps its declared rate): what the plan costs under
// the traffic that arrives.
func (r *Result) CostAtRates(rates map[string]float64) (costmodel.Cost, error) {
	if err := knownEndpoints(r.p.in.Stack, rates); err != nil {
		return costmodel.Cost{}, err
	}
	cp := *r.p.cp
	cp.Endpoints = slices.Clone(cp.Endpoints)
	for i := range cp.Endpoints {
		if v, ok := rates[cp.Endpoints[i].Name]; ok {
			cp.Endpoints[i].Rate = v
		}
	}
	return r.p.in.Cost.Cost(&cp, r.state.ev.Assignment()), nil
}

// PlanAtRates plans again from the input r was planned from (the same
// NIC model, options and cost function) with the endpoints' rates
// replaced by rates (packets a second, by endpoint name; an endpoint not
// named keeps its declared rate). The stack of the new plan is a copy;
// r's is untouched. A rate of 0 counts as undeclared: the cost model then
// counts flows for every endpoint.
func (r *Result) PlanAtRates(rates map[string]float64) (*Result, error) {
	if err := knownEndpoints(r.p.in.Stack, rates); err != nil {
		return nil, err
	}
	in := *r.p.in
	st := *in.Stack
	st.Endpoints = make([]*lpg.Endpoint, len(in.Stack.Endpoints))
	for i, e := range in.Stack.Endpoints {
		c := *e
		if v, ok := rates[e.Name]; ok {
			c.Rate = v
		}
		st.Endpoints[i] = &c
	}
	in.Stack = &st
	if in.Strategy == StrategyIncremental {
		in.Previous = r.Plan
	}
	return Run(&in)
}

// knownEndpoints refuses rates of endpoints the stack does not have.
func knownEndpoints(st *lpg.Stack, rates map[string]float64) error {
	for _, name := range slices.Sorted(maps.Keys(rates)) {
		v := rates[name]
		if !slices.ContainsFunc(st.Endpoints, func(e *lpg.Endpoint) bool { return e.Name == name }) {
			return fmt.Errorf("stack %s has no endpoint %s", st.Name, name)
		}
		if v < 0 || v > lpg.MaxRate || v != v {
			return fmt.Errorf("endpoint %s: rate %v is not a rate (0 to %v packets a second)", name, v, lpg.MaxRate)
		}
	}
	return nil
}

// Package engines places work on a NIC's or host's engines: the tasks of
// a programmable NIC (firmware event handlers) partitioned over its cores,
// minimising the busiest core's load plus the cost of sharing data across
// cores within memory budgets, and the choice of a copy engine per
// endpoint's message size.
package engines

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/prg"
)

// Task is work to place on an engine (a firmware event handler).
type Task struct {
	Name     string
	Load     float64  // percent of one engine's cycles
	Memory   float64  // bytes of code and private data
	Data     []string // data shared with other tasks
	Channels []string // explicitly managed hardware (DMA channels)
}

// Engine is a core or engine with a cycle and a memory budget.
type Engine struct {
	Name     string
	Capacity float64 // percent of cycles it can give
	Memory   float64 // bytes of fast memory (scratch pad); 0: unbounded
}

// Penalties of sharing across engines, in percentage points of load. A
// ring index shared between cores lives in the slower shared SRAM and is
// guarded by the one hardware semaphore; a DMA channel shared between
// cores needs that lock on every descriptor enqueue. The Tigon paper's
// partition argument (its section 4) ranks channel sharing worse than data
// sharing and both worse than a few percent of imbalance; these weights
// are dragonc's, chosen to reflect that order.
const (
	DataPenalty    = 2.0
	ChannelPenalty = 10.0
)

// Placement is an assignment of tasks to engines with its cost.
type Placement struct {
	Engine     []int     // per task, index into the engines
	Loads      []float64 // per engine, percent of its capacity
	Shared     []string  // data and channels used on more than one engine
	Cost       float64   // busiest engine's load plus sharing penalties
	Exact      bool      // proven optimal
	LowerBound float64   // for heuristic results: no placement costs less
	MemoryOK   bool      // every engine's tasks fit its memory
}

// ExactLimit is the number of tasks up to which placement is exhaustive.
const ExactLimit = 16

// Place assigns tasks to engines, minimising the busiest engine's load
// plus the cost of sharing across engines, within memory budgets.
func Place(tasks []Task, engines []Engine) Placement {
	if len(engines) == 0 || len(tasks) == 0 {
		return Placement{Exact: true, MemoryOK: true, Loads: make([]float64, len(engines)), Engine: make([]int, len(tasks))}
	}
	if len(tasks) <= ExactLimit {
		if p, ok := placeExact(tasks, engines, true); ok {
			return p
		}
		// Nothing fits the memory budgets: place for load and say so.
		p, _ := placeExact(tasks, engines, false)
		return p
	}
	return placeHeuristic(tasks, engines)
}

// Evaluate computes the cost of an assignment.
func Evaluate(tasks []Task, engines []Engine, assign []int) Placement {
	p := Placement{Engine: append([]int(nil), assign...), Loads: make([]float64, len(engines)), MemoryOK: true}
	mem := make([]float64, len(engines))
	for i, t := range tasks {
		e := assign[i]
		p.Loads[e] += t.Load * 100 / engines[e].Capacity
		mem[e] += t.Memory
	}
	for e, en := range engines {
		if en.Memory > 0 && mem[e] > en.Memory+1e-9 {
			p.MemoryOK = false
		}
	}
	users := map[string]map[int]bool{}
	kind := map[string]float64{}
	for i, t := range tasks {
		for _, d := range t.Data {
			k := "data " + d
			if users[k] == nil {
				users[k] = map[int]bool{}
			}
			users[k][assign[i]] = true
			kind[k] = DataPenalty
		}
		for _, c := range t.Channels {
			k := "channel " + c
			if users[k] == nil {
				users[k] = map[int]bool{}
			}
			users[k][assign[i]] = true
			kind[k] = ChannelPenalty
		}
	}
	for k, es := range users {
		if len(es) > 1 {
			p.Shared = append(p.Shared, k)
			p.Cost += kind[k]
		}
	}
	sort.Strings(p.Shared)
	p.Cost += maxOf(p.Loads)
	return p
}

// MaxLoad is the busiest engine's load, in percent of its capacity.
func (p Placement) MaxLoad() float64 { return maxOf(p.Loads) }

// Speedup is the throughput a placement gives a workload that keeps the
// engines busy, relative to one engine doing all of it: the work of all
// engines over the busiest one's (the busiest engine sets the rate).
// Sharing and memory effects are not in it.
func (p Placement) Speedup() float64 {
	total := 0.0
	for _, l := range p.Loads {
		total += l
	}
	if m := p.MaxLoad(); m > 0 {
		return total / m
	}
	return 1
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// placeExact is a depth-first branch and bound over every assignment.
// Tasks are tried heaviest first; engines that are still empty and alike
// are tried once (symmetry).
func placeExact(tasks []Task, engines []Engine, fitMemory bool) (Placement, bool) {
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tasks[order[a]].Load > tasks[order[b]].Load })
	assign := make([]int, len(tasks))
	load := make([]float64, len(engines))
	mem := make([]float64, len(engines))
	best := Placement{Cost: math.Inf(1)}
	found := false
	var dfs func(k int)
	dfs = func(k int) {
		if maxOf(load) >= best.Cost {
			return // bound: sharing only adds
		}
		if k == len(order) {
			p := Evaluate(tasks, engines, assign)
			if (!fitMemory || p.MemoryOK) && p.Cost < best.Cost-1e-9 {
				best, found = p, true
			}
			return
		}
		i := order[k]
		triedEmpty := map[string]bool{}
		for e := range engines {
			if load[e] == 0 && mem[e] == 0 {
				key := fmt.Sprint(engines[e].Capacity, engines[e].Memory)
				if triedEmpty[key] {
					continue
				}
				triedEmpty[key] = true
			}
			if fitMemory && engines[e].Memory > 0 && mem[e]+tasks[i].Memory > engines[e].Memory+1e-9 {
				continue
			}
			assign[i] = e
			load[e] += tasks[i].Load * 100 / engines[e].Capacity
			mem[e] += tasks[i].Memory
			dfs(k + 1)
			load[e] -= tasks[i].Load * 100 / engines[e].Capacity
			mem[e] -= tasks[i].Memory
		}
	}
	dfs(0)
	best.Exact = found
	return best, found
}

// placeHeuristic places the heaviest task first on the engine where it
// costs least, then moves single tasks while that helps. It reports a
// lower bound: the load of a perfect split or of the heaviest task.
func placeHeuristic(tasks []Task, engines []Engine) Placement {
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tasks[order[a]].Load > tasks[order[b]].Load })
	assign := make([]int, len(tasks))
	placed := make([]bool, len(tasks))
	for _, i := range order {
		best, bestCost := 0, math.Inf(1)
		for e := range engines {
			assign[i] = e
			placed[i] = true
			sub := Evaluate(subset(tasks, placed), engines, subsetAssign(assign, placed))
			if sub.Cost < bestCost {
				best, bestCost = e, sub.Cost
			}
		}
		assign[i] = best
	}
	cur := Evaluate(tasks, engines, assign)
	for improved := true; improved; {
		improved = false
		for i := range tasks {
			old := assign[i]
			for e := range engines {
				if e == old {
					continue
				}
				assign[i] = e
				if p := Evaluate(tasks, engines, assign); p.Cost < cur.Cost-1e-9 && (p.MemoryOK || !cur.MemoryOK) {
					cur, old, improved = p, e, true
				}
			}
			assign[i] = old
		}
	}
	total, heaviest, capacity := 0.0, 0.0, 0.0
	for _, t := range tasks {
		total += t.Load
		heaviest = math.Max(heaviest, t.Load)
	}
	for _, e := range engines {
		capacity += e.Capacity
	}
	cur.LowerBound = math.Max(total*100/capacity, heaviest*100/engines[0].Capacity)
	return cur
}

func subset(tasks []Task, keep []bool) []Task {
	var out []Task
	for i, t := range tasks {
		if keep[i] {
			out = append(out, t)
		}
	}
	return out
}

func subsetAssign(assign []int, keep []bool) []int {
	var out []int
	for i, a := range assign {
		if keep[i] {
			out = append(out, a)
		}
	}
	return out
}

// ModelTasks reads the tasks and engines of a model. A task with a cost
// per packet loads its engine in proportion to rate (packets per second):
// cycles per packet times rate over the engine's clock. Such a task that
// serves tables (prg.Task.Tables) runs only while one of them steers
// (steers reports whether a table holds entries; nil: none does).
func ModelTasks(m *prg.Model, rate float64, steers func(table string) bool) ([]Task, []Engine) {
	clock := 0.0
	for _, e := range m.Engine {
		if v, ok := e.Props["clock"]; ok {
			if hz, ok := dsl.Scale(v.Unit, dsl.Frequency); ok {
				clock = v.Num * hz
			}
		}
	}
	var tasks []Task
	for _, t := range m.Tasks {
		tk := Task{Name: t.Name}
		if v, ok := t.Props["percent"]; ok {
			tk.Load = v.Num
		}
		if v, ok := t.Props["cycles_per_packet"]; ok {
			inUse := len(t.Tables) == 0 || steers != nil && slices.ContainsFunc(t.Tables, steers)
			if rate <= 0 || clock <= 0 || !inUse {
				continue // not in use
			}
			tk.Load = v.Num * rate / clock * 100
		}
		if v, ok := t.Props["code"]; ok {
			tk.Memory = bytesOf(v)
		}
		tk.Data = names(t.Props["data"])
		tk.Channels = names(t.Props["channels"])
		tasks = append(tasks, tk)
	}
	var engines []Engine
	for _, e := range m.Engines(prg.EngineNICCore) { // copy engines and VIA providers run no tasks
		en := Engine{Name: e.Name, Capacity: 100}
		if v, ok := e.Props["scratchpad"]; ok {
			en.Memory = bytesOf(v)
		}
		engines = append(engines, en)
	}
	return tasks, engines
}

func names(v graph.Value) []string {
	var out []string
	for _, x := range v.List {
		out = append(out, x.Str)
	}
	return out
}

func bytesOf(v graph.Value) float64 {
	if scale, ok := dsl.Scale(v.Unit, dsl.Size); ok {
		return v.Num * scale
	}
	return v.Num
}

// CopyChoice is where an endpoint's bulk copies run.
type CopyChoice struct {
	Engine string // "cpu" or the copy engine's name
	Reason string
}

// Copies decides, per message size, whether an endpoint's copies go to a
// copy engine, by the I/OAT paper's figure for the copy's kind:
//
//   - Open-MX sends messages up to 32 KiB eagerly through a ring the
//     library reads while the data is in cache, where the CPU always wins
//     (Fig. 4a).
//   - Larger Open-MX messages are pulled: the driver copies them into the
//     receiving process's buffer, an inter-process copy. For those the
//     paper's IPC bandwidth (Fig. 9b, section 4.5) has the CPU's
//     kernel-assisted copy ahead of the engine up to 256 KB and the engine
//     ahead beyond 1 MB: the crossover is crossover_ipc_kib.
//   - Other copies are in-process (an offloaded memcpy from a cold
//     buffer, Fig. 4b-c): the engine wins from 16 KiB with 4 channels,
//     256 KiB with 1.
func Copies(eng *prg.Engine, proto string, message int) CopyChoice {
	if eng == nil || message <= 0 {
		return CopyChoice{Engine: "cpu", Reason: "no message size declared or no copy engine"}
	}
	crossKiB := 16.0
	if v, ok := eng.Props["crossover_4ch_kib"]; ok {
		crossKiB = v.Num
	}
	channels := 4.0
	if v, ok := eng.Props["channels"]; ok {
		channels = v.Num
	}
	if channels < 4 {
		crossKiB = 256
		if v, ok := eng.Props["crossover_1ch_kib"]; ok {
			crossKiB = v.Num
		}
	}
	kind := fmt.Sprintf("in-process copies from a cold buffer (crossover of %g channels)", channels)
	// The engine wins from the in-process crossover on (Fig. 4c), and
	// only above the inter-process one ("till 256 KB" the CPU is ahead).
	from := 0
	if proto == "openmx" {
		from = 1
		crossKiB = 256
		if v, ok := eng.Props["crossover_ipc_kib"]; ok {
			crossKiB = v.Num
		}
		kind = "inter-process copies (the I/OAT paper's IPC figure)"
	}
	cross := int(crossKiB * 1024)
	const eager = 32 << 10 // Open-MX eager limit (docs/nics.md, Open-MX paper)
	switch {
	case proto == "openmx" && message <= eager:
		return CopyChoice{Engine: "cpu", Reason: fmt.Sprintf("%d B messages go eagerly through a ring read in cache; the CPU copy wins there", message)}
	case message >= cross+from:
		return CopyChoice{Engine: eng.Name, Reason: fmt.Sprintf("%d B %s: above the %g KiB crossover", message, kind, crossKiB)}
	}
	return CopyChoice{Engine: "cpu", Reason: fmt.Sprintf("%d B %s: the CPU wins up to the %g KiB crossover", message, kind, crossKiB)}
}

package engines_test

import (
	"math/rand"
	"testing"

	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/engines"
	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/graph"
)

// TestTigonPartition compares the placement of the Tigon's handlers with
// the partition the paper published (CPU A: Mailbox, DMA Write Complete,
// Receive Complete, Update Receive Return Producer; the rest on CPU B).
func TestTigonPartition(t *testing.T) {
	m := embedtest.Model(t, "tigon")
	tasks, engs := engines.ModelTasks(m, 0, nil)
	if len(tasks) != 9 || len(engs) != 2 {
		t.Fatalf("%d tasks, %d engines", len(tasks), len(engs))
	}
	p := engines.Place(tasks, engs)
	if !p.Exact || !p.MemoryOK {
		t.Fatalf("placement %+v", p)
	}
	onA := map[string]bool{}
	for i, tk := range tasks {
		if engs[p.Engine[i]].Name == "CpuA" {
			onA[tk.Name] = true
		}
	}
	want := map[string]bool{"Mailbox": true, "DMAWriteComplete": true, "ReceiveComplete": true, "UpdateRecvReturnProducer": true}
	for _, tk := range tasks {
		if onA[tk.Name] != want[tk.Name] {
			t.Errorf("%s on CPU A: %v, the paper's partition: %v", tk.Name, onA[tk.Name], want[tk.Name])
		}
	}
	a, b := p.Loads[0], p.Loads[1]
	if engs[0].Name != "CpuA" {
		a, b = b, a
	}
	t.Logf("load split CPU A %.1f%% / CPU B %.1f%%, shared: %v", a, b, p.Shared)
	// The shares are Fig. 5's readings, not fitted: CPU A holds Receive
	// Complete (30 %) and three handlers of the 4-6 % band, CPU B the
	// rest, so A's part of the total lies in [42, 48] / 99.6 % whatever
	// the exact values; the paper's 47 % lies there too.
	if share := a / (a + b); share < 42/99.6 || share > 48/99.6 {
		t.Errorf("load split %.1f / %.1f, outside what Fig. 5 allows", a, b)
	}
	if len(p.Shared) != 3 {
		t.Errorf("shared across cores: %v; the paper's partition shares three variables", p.Shared)
	}
}

// TestTigonGains compares the gain the model predicts from placing the
// handlers on both cores with the paper's measured gains of PARALLEL
// over RELEASE (abstract; section 6.1, Figs. 10-11; Table 3). The model
// counts cycles only, so it predicts the CPU-bound case, bidirectional
// minimum-size UDP: the paper's +157 % there comes from the
// parallelization, which alone gives +37..95 % (Fig. 11), and from the
// scratch pads (up to +70 % more), which the model does not count. So the
// prediction must fall in the parallelization's range and below the total.
// Maximum-size UDP (+65 %) is bounded by the Ethernet limit and the
// services (+32..107 %) by the host; the model predicts neither.
func TestTigonGains(t *testing.T) {
	m := embedtest.Model(t, "tigon")
	tasks, engs := engines.ModelTasks(m, 0, nil)
	p := engines.Place(tasks, engs)
	gain := 100 * (p.Speedup() - 1)
	t.Logf("predicted gain of two cores, CPU-bound: +%.0f %% (paper: +157 %% total, +37..95 %% from the parallelization)", gain)
	if gain < 37 || gain > 95 {
		t.Errorf("predicted +%.0f %%, outside the paper's +37..95 %% from parallelization alone", gain)
	}
	if gain >= 157 {
		t.Errorf("predicted +%.0f %%, above the paper's total +157 %%", gain)
	}
}

// TestPlaceOptimal checks the exact search against enumeration of every
// assignment on random task sets, and the heuristic against its bound.
func TestPlaceOptimal(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for k := 0; k < 150; k++ {
		n, ne := 1+rng.Intn(8), 1+rng.Intn(3)
		tasks := make([]engines.Task, n)
		for i := range tasks {
			tasks[i] = engines.Task{Name: string(rune('a' + i)), Load: float64(1 + rng.Intn(40)), Memory: float64(rng.Intn(4) * 1024)}
			for _, d := range []string{"x", "y", "z"} {
				if rng.Intn(3) == 0 {
					tasks[i].Data = append(tasks[i].Data, d)
				}
			}
			if rng.Intn(4) == 0 {
				tasks[i].Channels = []string{"dma"}
			}
		}
		engs := make([]engines.Engine, ne)
		for e := range engs {
			engs[e] = engines.Engine{Name: string(rune('A' + e)), Capacity: 100, Memory: float64((2 + rng.Intn(6)) * 1024)}
		}
		got := engines.Place(tasks, engs)
		best := -1.0
		assign := make([]int, n)
		var rec func(i int)
		rec = func(i int) {
			if i == n {
				if p := engines.Evaluate(tasks, engs, assign); p.MemoryOK == got.MemoryOK && (best < 0 || p.Cost < best) {
					best = p.Cost
				}
				return
			}
			for e := range engs {
				assign[i] = e
				rec(i + 1)
			}
		}
		rec(0)
		if got.Cost > best+1e-6 {
			t.Fatalf("case %d: placement costs %.2f, optimum %.2f", k, got.Cost, best)
		}
	}
	// Beyond the exact limit: the heuristic reports its lower bound.
	var many []engines.Task
	for i := 0; i < 30; i++ {
		many = append(many, engines.Task{Name: string(rune('a' + i%26)), Load: float64(1 + rng.Intn(10))})
	}
	p := engines.Place(many, []engines.Engine{{Name: "A", Capacity: 100}, {Name: "B", Capacity: 100}})
	if p.Exact || p.LowerBound <= 0 || p.Cost < p.LowerBound-1e-9 {
		t.Errorf("heuristic: %+v", p)
	}
	t.Logf("30 tasks on 2 engines: heuristic %.2f, lower bound %.2f (%.1f%% above)", p.Cost, p.LowerBound, 100*(p.Cost/p.LowerBound-1))
}

func TestCopyDecisions(t *testing.T) {
	m := embedtest.Model(t, "ioat")
	eng := m.Engine[0]
	cases := []struct {
		proto   string
		message int
		want    string
	}{
		{"openmx", 4 << 20, "IOAT"},
		{"openmx", 32 << 10, "cpu"},     // eager: in cache
		{"openmx", 64 << 10, "cpu"},     // pulled, inter-process: the CPU up to 256 KB (Fig. 9b)
		{"openmx", 256 << 10, "cpu"},    // "till 256 KB"
		{"openmx", 256<<10 + 1, "IOAT"}, // beyond it the engine
		{"udp", 16<<10 - 1, "cpu"},      // just below the crossover
		{"udp", 16 << 10, "IOAT"},       // at the crossover
		{"tcp", 0, "cpu"},
	}
	for _, c := range cases {
		if got := engines.Copies(eng, c.proto, c.message); got.Engine != c.want {
			t.Errorf("%s %d B: %s (%s), want %s", c.proto, c.message, got.Engine, got.Reason, c.want)
		}
	}
	one := *eng
	one.Props = map[string]graph.Value{}
	for k, v := range eng.Props {
		one.Props[k] = v
	}
	ch := one.Props["channels"]
	ch.Num = 1
	one.Props["channels"] = ch
	if got := engines.Copies(&one, "udp", 100<<10); got.Engine != "cpu" {
		t.Errorf("1 channel, 100 KiB: %s; the crossover is 256 KiB", got.Engine)
	}
	if got := engines.Copies(&one, "udp", 256<<10); got.Engine != "IOAT" {
		t.Errorf("1 channel, 256 KiB: %s", got.Engine)
	}
}

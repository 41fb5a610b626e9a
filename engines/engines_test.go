package engines_test

import (
	"math/rand"
	"testing"

	"github.com/dragonc/dragonc/engines"
	"github.com/dragonc/dragonc/internal/embedtest"
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
	if a < 46 || a > 48 || b < 52 || b > 54 {
		t.Errorf("load split %.1f / %.1f, the paper reports 47 / 53", a, b)
	}
	if len(p.Shared) != 3 {
		t.Errorf("shared across cores: %v; the paper's partition shares three variables", p.Shared)
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
		{"openmx", 32 << 10, "cpu"},    // eager: in cache
		{"openmx", 32<<10 + 1, "IOAT"}, // pulled: cold, above 16 KiB
		{"udp", 16<<10 - 1, "cpu"},     // just below the crossover
		{"udp", 16 << 10, "IOAT"},      // at the crossover
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

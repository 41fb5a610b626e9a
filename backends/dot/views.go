package dot

import (
	"fmt"
	"sort"
	"strings"
)

// view is one cluster of an embedding picture: one queue, or several
// queues drawn alike but for which endpoints each delivers.
type view struct {
	queues []QueueView
	ids    []int          // the LPG nodes drawn, in LPG order
	status map[int]Status // per drawn node
	on     map[int][]int  // per drawn delivery node: the IDs of the queues that deliver it
}

// queueViews groups the queues of a picture into views. Queues whose nodes
// other than the delivery nodes are drawn alike, and whose delivery nodes
// do not clash (one drawn plain, another shaded), share a view: the
// repeated protocol chain of eight or a hundred RSS queues is drawn once,
// and only what differs, the endpoints, says on which queue it is.
func queueViews(p Picture) []*view {
	endpoint := make([]bool, len(p.LPG.Nodes))
	if p.Endpoint != nil {
		for _, n := range p.LPG.Nodes {
			endpoint[n.ID] = p.Endpoint(n)
		}
	}
	var views []*view
	bySig := map[string][]*view{}
	for _, q := range p.Queues {
		st := make([]Status, len(p.LPG.Nodes))
		var sig strings.Builder
		for _, n := range p.LPG.Nodes {
			st[n.ID] = q.Status(n.Name)
			if endpoint[n.ID] {
				sig.WriteByte('e')
			} else {
				fmt.Fprintf(&sig, "%d", st[n.ID])
			}
		}
		var into *view
		for _, v := range bySig[sig.String()] {
			if v.fits(st, endpoint) {
				into = v
				break
			}
		}
		if into == nil {
			into = &view{status: map[int]Status{}, on: map[int][]int{}}
			bySig[sig.String()] = append(bySig[sig.String()], into)
			views = append(views, into)
		}
		into.queues = append(into.queues, q)
		for id, s := range st {
			if s == Omit {
				continue
			}
			into.status[id] = s
			if endpoint[id] {
				into.on[id] = append(into.on[id], q.ID)
			}
		}
	}
	for _, v := range views {
		for _, n := range p.LPG.Nodes {
			if _, ok := v.status[n.ID]; ok {
				v.ids = append(v.ids, n.ID)
			}
		}
	}
	return views
}

// fits reports whether a queue with the statuses st may join v: no
// delivery node drawn in both is drawn differently (the rest is alike by
// the signature).
func (v *view) fits(st []Status, endpoint []bool) bool {
	for id, s := range st {
		if endpoint[id] && s != Omit {
			if old, ok := v.status[id]; ok && old != s {
				return false
			}
		}
	}
	return true
}

// name is the cluster label of a view: "queue 4 (core 4)", or for several
// queues "queues 1..3, 5 (cores 1..3, 5)".
func (v *view) name() string {
	ids, cores := make([]int, len(v.queues)), make([]int, len(v.queues))
	for i, q := range v.queues {
		ids[i], cores[i] = q.ID, q.Core
	}
	if len(v.queues) == 1 {
		return fmt.Sprintf("queue %d (core %d)", ids[0], cores[0])
	}
	return fmt.Sprintf("queues %s (cores %s)", runs(ids), runs(cores))
}

// deliveredOn says, for each drawn node of a view of several queues that
// stands for delivery nodes not every one of its queues delivers, on which
// queues they are ("queue 1", "queues 2, 5"). f folds the drawn nodes ids.
func (v *view) deliveredOn(ids []int, f folding) map[int]string {
	if len(v.queues) < 2 {
		return nil
	}
	queues := map[int][]int{}
	for _, id := range ids {
		if qs, ok := v.on[id]; ok {
			queues[f.rep[id]] = append(queues[f.rep[id]], qs...)
		}
	}
	out := map[int]string{}
	for rep, qs := range queues {
		qs = unique(qs)
		switch {
		case len(qs) == len(v.queues):
		case len(qs) == 1:
			out[rep] = fmt.Sprintf("queue %d", qs[0])
		default:
			out[rep] = "queues " + runs(qs)
		}
	}
	return out
}

// unique sorts xs and drops repeats.
func unique(xs []int) []int {
	xs = append([]int(nil), xs...)
	sort.Ints(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// runs writes numbers in ascending order, runs of minRun or more
// consecutive ones as a range: [1 2 3 5] -> "1..3, 5".
func runs(xs []int) string {
	xs = unique(xs)
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j-i+1 >= minRun {
			parts = append(parts, fmt.Sprintf("%d..%d", xs[i], xs[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, fmt.Sprint(xs[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

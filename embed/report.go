package embed

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/plan"
)

// WriteReport prints the plan for people: the configuration chosen, queues
// with their endpoints and cores, where the LPG's work happens, and the
// predicted cost next to its references. The plan's warnings are not in
// it: dragonc prints them on standard error, once, whatever the output.
func (r *Result) WriteReport(w io.Writer) {
	pl := r.Plan
	fmt.Fprintf(w, "dragonc plan: stack %s on %s (strategy %s, cost %s)\n\n", pl.Stack, pl.NIC, pl.Strategy, pl.Cost.Function)
	fmt.Fprintln(w, "Configuration:")
	for _, c := range pl.Config {
		switch {
		case len(c.Entries) > 0:
			fmt.Fprintf(w, "  %s (%s): %d entries\n", c.Node, c.Kind, len(c.Entries))
			for i, e := range c.Entries {
				if i == 8 && len(c.Entries) > 10 {
					fmt.Fprintf(w, "    ... %d more\n", len(c.Entries)-8)
					break
				}
				owner := ""
				if e.Endpoint != "" {
					owner = "  [" + e.Endpoint + "]"
				}
				fmt.Fprintf(w, "    %s -> %s (priority %d)%s\n", e.Match, e.Action, e.Priority, owner)
			}
		case c.Choice != "":
			fmt.Fprintf(w, "  %s (%s): %s\n", c.Node, c.Kind, c.Choice)
		case len(c.Indirection) > 0:
			fmt.Fprintf(w, "  %s (%s): %d buckets over %s\n", c.Node, c.Kind, len(c.Indirection), strings.Join(distinct(c.Indirection), " "))
		case len(c.Placement) > 0:
			fmt.Fprintf(w, "  %s (%s): %s\n", c.Node, c.Kind, formatPlacement(c.Placement))
		case len(c.Runs) > 0:
			fmt.Fprintf(w, "  %s (%s): runs %d LPG nodes, drops at %d: %s\n", c.Node, c.Kind, len(c.Runs), len(c.Drops), strings.Join(c.Runs, " "))
		}
	}
	fmt.Fprintln(w, "\nQueues:")
	for _, q := range pl.Queues {
		eps := q.Endpoints
		more := ""
		if len(eps) > 8 {
			more = fmt.Sprintf(" ... (%d endpoints)", len(eps))
			eps = eps[:8]
		}
		if len(eps) == 0 {
			eps = []string{"(no endpoint)"}
		}
		fmt.Fprintf(w, "  queue %-3d core %-3d %s%s\n", q.ID, q.Core, strings.Join(eps, " "), more)
		fmt.Fprintf(w, "            software: %d nodes\n", len(q.Software))
	}
	fmt.Fprintln(w, "\nEndpoints:")
	for i, e := range pl.Endpoints {
		if i == 12 && len(pl.Endpoints) > 14 {
			fmt.Fprintf(w, "  ... %d more\n", len(pl.Endpoints)-12)
			break
		}
		fmt.Fprintf(w, "  %-14s queues %-8s irq cores %-6s steering %s", e.Name, joinInts(e.Queues), joinInts(e.IRQCores), e.Steering)
		if e.AppCores != nil {
			fmt.Fprintf(w, "  app on cores %s", joinInts(e.AppCores))
		}
		fmt.Fprintln(w)
		if e.Spread != "" {
			fmt.Fprintf(w, "  %-14s spread rule: %s; %s\n", "", e.SpreadWhy, e.Spread)
		}
		if e.Cores != "" {
			fmt.Fprintf(w, "  %-14s cores %s: %s\n", "", e.Cores, e.CoresWhy)
		}
	}
	if len(pl.Engines) > 0 {
		fmt.Fprintln(w, "\nEngines (task partition):")
		for _, en := range pl.Engines {
			fmt.Fprintf(w, "  %-8s %5.1f%%  %s  (%.1f KiB of code)\n", en.Name, en.Percent, strings.Join(en.Tasks, " "), en.Memory/1024)
		}
		if r.Tasks != nil {
			fmt.Fprintf(w, "  shared across engines: %s\n", strings.Join(r.Tasks.Shared, ", "))
		}
	}
	omx := false
	for _, e := range pl.Endpoints {
		if e.Copy != "" {
			if !omx {
				fmt.Fprintln(w, "\nCopies:")
				omx = true
			}
			fmt.Fprintf(w, "  %-14s %-5s %s\n", e.Name, e.Copy, e.Why)
		}
	}
	if v := pl.VIA; v != nil {
		reportVIA(w, v)
	}
	if strings.Contains(pl.NIC, "myri") {
		fmt.Fprintln(w, "\nOpen-MX on the Myri-10G (Goglin, Table 1, IMB ping-pong):")
		fmt.Fprintln(w, "  0-byte latency: multiqueue with the process on its queue's core 11.71 us (round-robin single IRQ ~11.4 us,")
		fmt.Fprintln(w, "  single IRQ on a core sharing the cache 9.34 us); 4 MB throughput 703 MiB/s bound vs ~646 MiB/s round-robin,")
		fmt.Fprintln(w, "  955 MiB/s with I/OAT vs ~905 MiB/s round-robin")
	}
	counts := map[string]int{}
	for _, pp := range pl.Placement {
		k := pp.Where
		if pp.Descriptor {
			k = "hardware (descriptor flag)"
		}
		counts[k]++
	}
	fmt.Fprintln(w, "\nPlacement of LPG nodes:")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "  %-28s %d\n", k, counts[k])
	}
	fmt.Fprintf(w, "\nPredicted cost (%s): %s\n", pl.Cost.Function, pl.Cost.Predicted())
	if pl.Cost.Tie != 0 && pl.Cost.Function != (costmodel.Cycles{}).Name() {
		fmt.Fprintf(w, "  then, among equal costs, load served off its application's cores: %s\n", costmodel.FormatNumber(pl.Cost.Tie))
	}
	for _, ref := range pl.Cost.References() {
		fmt.Fprintf(w, "  %s: %s\n", ref.Long, ref.Cost)
	}
	if Strategy(pl.Strategy) != StrategyDragonetGreedy {
		if g, err := r.Greedy(); err != nil {
			fmt.Fprintf(w, "  dragonet-greedy: stops: %s\n", strings.TrimPrefix(err.Error(), "dragonet-greedy: "))
		} else {
			fmt.Fprintf(w, "  dragonet-greedy: %s\n", g)
		}
	}
	if pl.Changes != nil {
		fmt.Fprintf(w, "\nChanges: %d rules to remove, %d to add, %d endpoints moved\n", len(pl.Changes.Remove), len(pl.Changes.Add), len(pl.Changes.Moved))
		for _, x := range pl.Changes.Remove {
			fmt.Fprintf(w, "  - %s: %s -> %s [%s]\n", x.Node, x.Match, x.Action, x.Endpoint)
		}
		for _, x := range pl.Changes.Add {
			fmt.Fprintf(w, "  + %s: %s -> %s [%s]\n", x.Node, x.Match, x.Action, x.Endpoint)
		}
	}
}

// distinct returns the different strings of xs, sorted.
func distinct(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func formatPlacement(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"->"+m[k])
	}
	return strings.Join(parts, " ")
}

// Explain says why an LPG node is where it is, queue by queue. The name
// may also be an endpoint's: then it says how the endpoint's packets are
// steered, where its delivery node is, and where each decision on the way
// to it (demultiplexers, validity checks, filters) is made on the
// endpoint's queues. An unknown name is an error listing close matches
// among both.
func (r *Result) Explain(name string) (string, error) {
	em := r.Embedding
	if _, ok := em.LPG.Lookup(name); ok {
		var b strings.Builder
		r.explainNode(&b, name, em.Queues)
		return b.String(), nil
	}
	if n, ok := em.Delivery(name); ok {
		return r.explainEndpoint(name, n.ID), nil
	}
	var nodes, eps []string
	for _, n := range em.LPG.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, e := range r.Plan.Endpoints {
		eps = append(eps, e.Name)
	}
	what := "an LPG node or an endpoint"
	if len(eps) == 0 {
		what = "an LPG node"
	}
	msg := fmt.Sprintf("%q is not %s of stack %s", name, what, r.Plan.Stack)
	if m := closeMatches(name, slices.Concat(eps, nodes)); len(m) > 0 {
		quoted := make([]string, len(m))
		for i, x := range m {
			quoted[i] = strconv.Quote(x)
		}
		msg += "; did you mean " + strings.Join(quoted, ", ") + "?"
	}
	return "", errors.New(msg)
}

// explainNode writes where an LPG node is on each of the queues.
func (r *Result) explainNode(b *strings.Builder, node string, queues []*embedding.QueueEmbedding) {
	em := r.Embedding
	pp := r.Plan.Placement[node]
	where := pp.Where
	if pp.Engine != "" {
		where += " (" + pp.Engine + ")"
	}
	fmt.Fprintf(b, "%s: %s\n", node, where)
	for _, qe := range queues {
		fmt.Fprintf(b, "  queue %d: %s: %s\n", qe.ID, qe.StatusOf(node), em.Reason(qe, node))
	}
}

// explainEndpoint explains an endpoint whose delivery node is the LPG
// node deliver: its steering and filter entries, then the delivery node
// and each decision on the way to it on the endpoint's queues.
func (r *Result) explainEndpoint(name string, deliver int) string {
	em, g := r.Embedding, r.Embedding.LPG
	var b strings.Builder
	var pe plan.Endpoint
	for _, e := range r.Plan.Endpoints {
		if e.Name == name {
			pe = e
		}
	}
	desc := ""
	for _, e := range r.p.in.Stack.Endpoints {
		if e.Name == name {
			desc = " (" + e.Describe() + ")"
		}
	}
	fmt.Fprintf(&b, "endpoint %s%s: delivered by LPG node %s\n", name, desc, g.Nodes[deliver].Name)
	if len(pe.Queues) == 0 {
		fmt.Fprintf(&b, "  no queue receives its packets: steering %s\n", pe.Steering)
	} else {
		fmt.Fprintf(&b, "  its packets reach queues %s (interrupt cores %s), steering %s\n", joinInts(pe.Queues), joinInts(pe.IRQCores), pe.Steering)
	}
	for _, c := range r.Plan.Config {
		for _, e := range c.Entries {
			if e.Endpoint == name {
				fmt.Fprintf(&b, "  %s entry: %s -> %s (priority %d)\n", c.Node, e.Match, e.Action, e.Priority)
			}
		}
	}
	var queues []*embedding.QueueEmbedding
	for _, q := range pe.Queues {
		if qe := em.Queue(q); qe != nil {
			queues = append(queues, qe)
		}
	}
	b.WriteString("\n")
	r.explainGrouped(&b, g.Nodes[deliver].Name, "", queues)
	// The decisions on the way: every node with a choice of ports from
	// which the delivery node can be reached, in the LPG's order, with the
	// ports that lead there.
	preds := g.Preds()
	toward := make([]bool, len(g.Nodes))
	toward[deliver] = true
	work := []int{deliver}
	for len(work) > 0 {
		n := work[len(work)-1]
		work = work[:len(work)-1]
		for _, p := range preds[n] {
			if !toward[p] {
				toward[p] = true
				work = append(work, p)
			}
		}
	}
	var decisions []int
	for _, id := range em.Order() {
		if toward[id] && id != deliver && len(g.Nodes[id].Ports) > 1 {
			decisions = append(decisions, id)
		}
	}
	if len(decisions) > 0 {
		fmt.Fprintf(&b, "\n%d decisions on the way, in order, each with the port toward %s:\n", len(decisions), name)
	}
	for _, id := range decisions {
		var ports []string
		for _, p := range g.Nodes[id].Ports {
			if slices.ContainsFunc(p.Succ, func(s int) bool { return toward[s] }) {
				ports = append(ports, p.Name)
			}
		}
		r.explainGrouped(&b, g.Nodes[id].Name, " ["+strings.Join(ports, ", ")+"]", queues)
	}
	return b.String()
}

// explainGrouped writes where an LPG node is on the given queues, one line
// for the queues where it is for the same reason.
func (r *Result) explainGrouped(b *strings.Builder, node, note string, queues []*embedding.QueueEmbedding) {
	em := r.Embedding
	pp := r.Plan.Placement[node]
	where := pp.Where
	if pp.Engine != "" {
		where += " (" + pp.Engine + ")"
	}
	fmt.Fprintf(b, "%s%s: %s\n", node, note, where)
	type group struct {
		ids  []int
		why  string // the reason, its queue number as "each queue"
		once string // the reason as given, for a group of one
	}
	var groups []*group
	byWhy := map[string]*group{}
	for _, qe := range queues {
		once := em.Reason(qe, node)
		why := qe.StatusOf(node).String() + ": " + strings.ReplaceAll(once, fmt.Sprintf("queue %d", qe.ID), "each queue")
		gr := byWhy[why]
		if gr == nil {
			gr = &group{why: why, once: qe.StatusOf(node).String() + ": " + once}
			byWhy[why] = gr
			groups = append(groups, gr)
		}
		gr.ids = append(gr.ids, qe.ID)
	}
	for _, gr := range groups {
		if len(gr.ids) == 1 {
			fmt.Fprintf(b, "  queue %d: %s\n", gr.ids[0], gr.once)
			continue
		}
		fmt.Fprintf(b, "  queues %s: %s\n", joinInts(gr.ids), gr.why)
	}
}

// closeMatches returns the candidates a mistyped name may have meant,
// best first: the nearest within a plausible typo (a third of the name,
// at least two edits, ignoring case) and those one edit further, then
// those containing it; at most five.
func closeMatches(name string, cands []string) []string {
	const most, longest = 5, 256 // the edit distance costs the product of the lengths
	if name == "" || len(name) > longest {
		return nil
	}
	lower := strings.ToLower(name)
	limit := max(2, len(name)/3)
	type match struct {
		name string
		d    int
	}
	var ms []match
	for _, c := range cands {
		lc := strings.ToLower(c)
		if len(c) <= longest && max(len(c)-len(name), len(name)-len(c)) <= limit {
			if d := diag.Distance(lower, lc); d <= limit {
				ms = append(ms, match{c, d})
				continue
			}
		}
		if len(name) >= 3 && strings.Contains(lc, lower) {
			ms = append(ms, match{c, limit + 1})
		}
	}
	best := limit
	for _, m := range ms {
		best = min(best, m.d)
	}
	ms = slices.DeleteFunc(ms, func(m match) bool { return m.d > best+1 && m.d <= limit })
	slices.SortFunc(ms, func(a, b match) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, m := range ms {
		if len(out) < most && !slices.Contains(out, m.name) {
			out = append(out, m.name)
		}
	}
	return out
}

// reportVIA prints the VI decision: each stream endpoint's transport, and
// the predicted latency per message size beside the paper's HYBRID.
func reportVIA(w io.Writer, v *plan.VIA) {
	fmt.Fprintf(w, "\nStreams over Virtual Interfaces (%s, %d of %d VIs):\n", v.Provider, v.VIsUsed, v.VIs)
	if len(v.Streams) == 0 {
		fmt.Fprintln(w, "  no tcp endpoints")
	}
	for _, s := range v.Streams {
		where := "tcp"
		if s.Transport == "vi" {
			where = fmt.Sprintf("VI %d", s.VI)
		}
		fmt.Fprintf(w, "  %-14s %-7s %s\n", s.Endpoint, where, s.Reason)
		if s.Transport == "vi" {
			combine := fmt.Sprintf("writes under %d B combined for %g ms", s.CombineMax, s.CombineDelayMS)
			if s.NoDelay {
				combine = "nodelay: no combining"
			}
			fmt.Fprintf(w, "  %-14s         window %d, acks after %d, %d receive descriptors, %d B chunks, copy up to %d B, %s\n",
				"", s.Window, s.AckThreshold, s.Descriptors, s.Chunk, s.CopyMax, combine)
		}
	}
	if v.Basis == "calibration" {
		fmt.Fprintf(w, "  decided by the calibration of %s\n", v.Calibration)
		fmt.Fprintf(w, "  (a VI only where it measured faster than kernel TCP, at the median and the 99th percentile); copy up to %d B:\n", v.CopyMax)
		fmt.Fprintf(w, "  %8s  %-8s %9s %9s %9s %9s %9s %9s\n", "size", "policy", "vi p50", "vi p99", "tcp p50", "tcp p99", "vi Mb/s", "tcp Mb/s")
		for _, r := range v.Sizes {
			fmt.Fprintf(w, "  %8d  %-8s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", r.Size, r.Policy, r.Predicted, r.SOVIAp99, r.TCP, r.TCPp99, r.SOVIAMbps, r.TCPMbps)
		}
		return
	}
	fmt.Fprintf(w, "  one-way latency (us) by message size: copy up to %d B, chosen from the provider's table,\n", v.CopyMax)
	fmt.Fprintln(w, "  beside the paper's SOVIA_HYBRID (copy up to 2 KB, measured) and TCP (estimated):")
	fmt.Fprintf(w, "  %8s  %-8s %9s %9s %9s %9s\n", "size", "policy", "predicted", "hybrid", "native", "tcp")
	for _, r := range v.Sizes {
		fmt.Fprintf(w, "  %8d  %-8s %9.1f %9.1f %9.1f %9.1f\n", r.Size, r.Policy, r.Predicted, r.Hybrid, r.Native, r.TCP)
	}
}

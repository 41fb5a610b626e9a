package embed

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/costmodel"
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
	fmt.Fprintf(w, "\nPredicted cost (%s): %s\n", pl.Cost.Function, costmodel.Format(pl.Cost.Kind, pl.Cost.Value))
	if pl.Cost.Tie != 0 && pl.Cost.Function != "cycles" {
		fmt.Fprintf(w, "  then, among equal costs, load served off its application's cores: %s\n", costmodel.FormatNumber(pl.Cost.Tie))
	}
	fmt.Fprintf(w, "  everything in software: %s\n", costmodel.Format(pl.Cost.SoftwareOnly.Kind, pl.Cost.SoftwareOnly.Value))
	fmt.Fprintf(w, "  Linux default (RSS only): %s\n", costmodel.Format(pl.Cost.RSSOnly.Kind, pl.Cost.RSSOnly.Value))
	if pl.Strategy != "dragonet-greedy" {
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

// Explain says why an LPG node is where it is, queue by queue.
func (r *Result) Explain(node string) (string, error) {
	em := r.Embedding
	if _, ok := em.LPG.Lookup(node); !ok {
		var names []string
		for _, n := range em.LPG.Nodes {
			names = append(names, n.Name)
		}
		return "", fmt.Errorf("the LPG has no node %q%s", node, suggest(node, names))
	}
	var b strings.Builder
	pp := r.Plan.Placement[node]
	fmt.Fprintf(&b, "%s: %s\n", node, pp.Where)
	for _, qe := range em.Queues {
		fmt.Fprintf(&b, "  queue %d: %s: %s\n", qe.ID, qe.StatusOf(node), em.Reason(qe, node))
	}
	return b.String(), nil
}

func suggest(name string, cands []string) string {
	if best := diag.Closest(name, cands); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
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
	fmt.Fprintf(w, "  one-way latency (us) by message size: copy up to %d B, chosen from the provider's table,\n", v.CopyMax)
	fmt.Fprintln(w, "  beside the paper's SOVIA_HYBRID (copy up to 2 KB, measured) and TCP (estimated):")
	fmt.Fprintf(w, "  %8s  %-8s %9s %9s %9s %9s\n", "size", "policy", "predicted", "hybrid", "native", "tcp")
	for _, r := range v.Sizes {
		fmt.Fprintf(w, "  %8d  %-8s %9.1f %9.1f %9.1f %9.1f\n", r.Size, r.Policy, r.Predicted, r.Hybrid, r.Native, r.TCP)
	}
}

package linux

import (
	"fmt"
	"os"
	"strings"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// linux.sh's steps are data: one row of words each in a table at the end
// of the script, which one loop feeds to the shell function of the row's
// kind. That function, written once in the script for every row of its
// kind, begins the step, applies it, reads it back from the interface and
// records what restores the old state.

// A kind is one kind of step: the shell function that applies, checks and
// records a step from its row.
type kind struct {
	name string // the shell function, a row's second word
	// fields name a row's words after the step number, in order; a last
	// name ending in "..." takes the rest of the row (the function has
	// them as "$@", and as one string under the name).
	fields []string
	// desc says what a step does, over the fields as $name: the script's
	// begin line and Steps' Desc are both this template with a row's words.
	desc string
	doc  string // what the function does, for its comment
	body string // the function after begin, each line indented
	// helper is a shell function the body calls, written once before
	// the first kind that needs it.
	helper string
}

// A step is one change linux.sh makes: a row of a kind's table.
type step struct {
	Step // what dragonc run needs to know of it
	kind *kind
	args []string // the row's words after the step number
}

// newStep makes the step of kind k with the row's words args and fills
// its Desc in. A row's words come from the plan (numbers, addresses, the
// names of a driver, its module parameters and of the model's nodes, see
// plainWord), never a free string, and must read back as written: letters,
// digits and _.,:/- only; anything else is an internal error.
func newStep(s Step, k *kind, args ...string) step {
	fixed := len(k.fields)
	if fixed > 0 && strings.HasSuffix(k.fields[fixed-1], "...") {
		fixed--
	}
	if len(args) < fixed || fixed == len(k.fields) && len(args) != fixed {
		panic(fmt.Sprintf("dragonc: internal error: %s row %q has %d words for fields %q", k.name, args, len(args), k.fields))
	}
	for _, a := range args {
		if a == "" || strings.IndexFunc(a, func(r rune) bool { return !isPlain(r) }) >= 0 {
			panic(fmt.Sprintf("dragonc: internal error: %s row word %q is not a plain word", k.name, a))
		}
	}
	s.Desc = k.expand(args)
	return step{Step: s, kind: k, args: args}
}

// isPlain reports whether r may stand in a row's word.
func isPlain(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.,:/-", r)
}

// plainWord is s with _ for each character a row's word cannot hold.
func plainWord(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if isPlain(r) {
			return r
		}
		return '_'
	}, s)
}

// expand is the kind's desc with a row's words.
func (k *kind) expand(args []string) string {
	return os.Expand(k.desc, func(name string) string {
		for i, f := range k.fields {
			if f == name {
				return args[i]
			}
			if f == name+"..." {
				return strings.Join(args[i:], " ")
			}
		}
		panic(fmt.Sprintf("dragonc: internal error: %s's description names $%s, which is not a field", k.name, name))
	})
}

// function is the kind's shell function: its comment, the fields as
// variables, begin with the description, then the body.
func (k *kind) function() string {
	var b strings.Builder
	usage := k.name
	for _, f := range k.fields {
		usage += " " + strings.ToUpper(f)
	}
	fmt.Fprintf(&b, "%s%s() {\n    step=$1", wrap(usage+": "+k.doc), k.name)
	rest := ""
	for i, f := range k.fields {
		if name, ok := strings.CutSuffix(f, "..."); ok {
			// The words themselves are "$@"; the string only where
			// the function says it.
			rest = fmt.Sprintf("\n    shift %d", i+1)
			if strings.Contains(k.desc+k.body, "$"+name) {
				rest += fmt.Sprintf("\n    %s=$*", name)
			}
			continue
		}
		fmt.Fprintf(&b, " %s=$%d", f, i+2)
	}
	fmt.Fprintf(&b, "%s\n    begin \"$step\" \"%s\"\n%s}\n", rest, k.desc, k.body)
	return b.String()
}

// wrap makes a shell comment of text, in lines of at most 76 characters.
func wrap(text string) string {
	var b strings.Builder
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 76 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}

// The kinds of step. Each body applies with run (printed under
// --dry-run), then, on a real run, reads the change back (fail names
// what did not take) and records the command that undoes it.
var (
	setChannels = &kind{
		name:   "set_channels",
		fields: []string{"n"},
		desc:   "$n combined channels (ethtool -L)",
		doc:    "the interface's queues as N combined channels.",
		body: `    [ "$dry" = 1 ] || old_channels=$(channels)
    run ethtool -L "$ifc" combined "$n" || { run_failed; return; }
    [ "$dry" = 1 ] && return
    [ "$(channels)" = "$n" ] || { fail "the interface does not report $n combined channels (ethtool -l)"; return; }
    record "ethtool -L $(q "$ifc") combined $(q "${old_channels:-1}")"
`,
	}
	// checkRxQueues is the queue count of a driver that takes it from a
	// module parameter when it loads (myri10ge: myri10ge_max_slices,
	// read-only): the script can only check the count in use, which the
	// kernel lists as /sys/class/net/IF/queues/rx-N
	// (netif_set_real_num_rx_queues).
	checkRxQueues = &kind{
		name:   "check_rx_queues",
		fields: []string{"n", "module", "param"},
		desc:   "$n receive queues (module parameter $param)",
		doc:    "checks that the interface runs N receive queues, which MODULE takes from PARAM when it loads.",
		body: `    [ "$dry" = 1 ] && return
    [ "$(rx_queues)" = "$n" ] && return
    why="the interface runs another number of receive queues than the plan's $n (/sys/class/net/IF/queues); $module takes it from the module parameter $param when it loads: modprobe -r $module && modprobe $module $param=$n"
    if [ "$module" = myri10ge ] && [ $((n & (n - 1))) -ne 0 ]; then
        why="$why (myri10ge rounds the count down to a power of two, myri10ge_probe_slices: it cannot run $n slices)"
    fi
    fail "$why"
`,
	}
	setFeature = &kind{
		name:   "set_feature",
		fields: []string{"option", "feature", "value"},
		desc:   "$option $value (ethtool -K)",
		doc:    "turns OPTION of ethtool -K on or off (VALUE); ethtool -k shows it as FEATURE.",
		body: `    [ "$dry" = 1 ] || old_value=$(feature "$feature")
    run ethtool -K "$ifc" "$option" "$value" || { run_failed; return; }
    [ "$dry" = 1 ] && return
    [ "$(feature "$feature")" = "$value" ] || { fail "$feature is not $value afterwards (ethtool -k); the driver cannot change it"; return; }
    if [ "$value" = on ]; then other=off; else other=on; fi
    record "ethtool -K $(q "$ifc") $option $(q "${old_value:-$other}")"
`,
	}
	setRSS = &kind{
		name:   "set_rss",
		fields: []string{"node", "queues", "weights..."},
		desc:   "RSS over queues $queues (ethtool -X, $node)",
		doc:    "spreads RSS (the model's NODE) over QUEUES (a comma list), one weight per queue.",
		body: `    run ethtool -X "$ifc" weight "$@" || { run_failed; return; }
    [ "$dry" = 1 ] && return
    [ "$(rss_queues)" = "$queues" ] || { fail 'the indirection table (ethtool -x) does not name exactly the planned queues'; return; }
    record "ethtool -X $(q "$ifc") default"
`,
	}
	// checkModuleParam is a hash a driver takes from a module parameter
	// (myri10ge_rss_hash, read-only once loaded; sysfs shows it).
	checkModuleParam = &kind{
		name:   "check_module_param",
		fields: []string{"module", "param", "value"},
		desc:   "the NIC hashes as the model says (module parameter $param = $value)",
		doc:    "checks that MODULE was loaded with PARAM=VALUE, the hash the model describes.",
		body: `    [ "$dry" = 1 ] && return
    [ "$(cat "$sys/module/$module/parameters/$param" 2>/dev/null)" = "$value" ] && return
    fail "the driver was loaded with another $param than $value (/sys/module/$module/parameters/$param), so the NIC does not hash as planned; reload it: modprobe -r $module && modprobe $module $param=$value"
`,
	}
	hashUDPPorts = &kind{
		name: "hash_udp_ports",
		desc: "hash UDP ports as TCP's (ethtool -N rx-flow-hash udp4 sdfn)",
		doc:  "puts the ports of UDP over IPv4 into the RSS hash, as TCP's are.",
		body: `    if [ "$dry" = 0 ]; then
        if flow_hash_ports udp4; then old_udp=sdfn; else old_udp=sd; fi
    fi
    run ethtool -N "$ifc" rx-flow-hash udp4 sdfn || { run_failed; return; }
    [ "$dry" = 1 ] && return
    flow_hash_ports udp4 || { fail 'UDP over IPv4 is not hashed on its ports afterwards (ethtool -n rx-flow-hash udp4)'; return; }
    record "ethtool -N $(q "$ifc") rx-flow-hash udp4 $old_udp"
`,
	}
	// addRule is one ntuple rule. ethtool exits 0 when the driver
	// refuses a rule, so the rule is read back.
	addRule = &kind{
		name:   "add_rule",
		fields: []string{"loc", "queue", "match..."},
		desc:   "filter rule $loc (ethtool -N flow-type $match action $queue)",
		doc:    "writes the ntuple rule that sends MATCH (flow-type's words) to QUEUE at location LOC.",
		body: `    if [ "$dry" = 0 ] && [ -n "$(rule_action "$loc")" ] && [ "$force" = 0 ]; then
        fail "rule location $loc holds a rule this script did not write (ethtool -n); delete it or use --force"
        return
    fi
    run ethtool -N "$ifc" flow-type "$@" action "$queue" loc "$loc" || { run_failed; return; }
    [ "$dry" = 1 ] && return
    [ "$(rule_action "$loc")" = "Direct to queue $queue" ] || { fail "rule $loc is not in the NIC's table afterwards (ethtool -n rule $loc): the driver refused it"; return; }
    record "ethtool -N $(q "$ifc") delete $loc"
`,
	}
)

// bindIRQ is the kind that puts a queue's interrupt on a core; what it
// says of a missing interrupt depends on how the driver names them.
func bindIRQ(d *prg.Driver, nq int) *kind {
	return &kind{
		name:   "bind_irq",
		fields: []string{"queue", "core"},
		desc:   "interrupt of queue $queue on core $core",
		doc:    "puts the interrupt of QUEUE on CORE (/proc/irq/IRQ/smp_affinity_list).",
		body: `    if [ "$dry" = 1 ]; then
        echo "echo $core > /proc/irq/IRQ/smp_affinity_list"
        return
    fi
    irq=$(irq_of "$queue")
    [ -n "$irq" ] || { fail "` + noIRQ(d, nq) + `"; return; }
    f="$proc/irq/$irq/smp_affinity_list"
    old_affinity=$(cat "$f")
    printf '%s\n' "$core" >"$f" || { fail "cannot write $f"; return; }
    [ "$(cat "$f")" = "$core" ] || { fail "the interrupt is not on core $core afterwards"; return; }
    record "printf '%s\\n' $(q "$old_affinity") >$(q "$f")"
`,
	}
}

// Steps lists the changes of linux.sh for a plan, in the script's order.
func Steps(r *embed.Result) []Step {
	if r.SoftwareStage() {
		return nil
	}
	steps, _ := stepsOf(r)
	out := make([]Step, len(steps))
	for i, st := range steps {
		out[i] = st.Step
	}
	return out
}

// stepsOf works out the steps of linux.sh: queue count, offloads, RSS,
// filters, interrupt affinity and queue masks, only as far as the driver
// exposes them; unsupported are the table entries ethtool cannot express.
func stepsOf(r *embed.Result) (steps []step, unsupported []string) {
	pl := r.Plan
	d := r.Driver()
	nq := queueCount(pl)
	channels := "ethtool -L"
	if d != nil && d.Channels != "" {
		channels = d.Channels
	}
	switch {
	case channels == "ethtool -L":
		steps = append(steps, newStep(Step{Kind: StepChannels}, setChannels, fmt.Sprint(nq)))
	case strings.HasPrefix(channels, "module "):
		steps = append(steps, newStep(Step{Kind: StepChannels}, checkRxQueues, fmt.Sprint(nq), d.Name, strings.TrimPrefix(channels, "module ")))
	}

	m := r.Model()
	// identity: whether a hash is the Open-MX endpoint hash rather than
	// RSS, which ethtool -X sets.
	identity := func(node string) bool {
		sp := m.Space(node)
		return sp != nil && sp.Identity
	}
	rxcsum, txcsum := false, false
	var rules []step
	var rss []string
	rssNode := ""
	for _, c := range pl.Config {
		switch {
		case c.Kind == "enum" && m.Feature(c.Node) == prg.FeatureRxChecksum:
			rxcsum = c.Choice == "on"
		case c.Kind == "enum" && m.Feature(c.Node) == prg.FeatureTxChecksum:
			txcsum = c.Choice == "on"
		case c.Kind == "table" && len(c.Entries) > 0:
			exposed := true
			if d != nil {
				_, exposed = d.Tables[c.Node]
			}
			for _, e := range c.Entries {
				match, q, ok := ntupleRule(e, r)
				if !ok || !exposed {
					unsupported = append(unsupported, fmt.Sprintf("%s: %s -> %s", c.Node, e.Match, e.Action))
					continue
				}
				loc := fmt.Sprint(len(rules))
				rules = append(rules, newStep(Step{Kind: StepRule, Node: c.Node, Entry: e}, addRule, append([]string{loc, fmt.Sprint(q)}, match...)...))
			}
		case c.Kind == "hash" && len(c.Indirection) > 0 && (d == nil && !identity(c.Node) || d != nil && d.RSS != nil && d.RSS.Node == c.Node):
			rss, rssNode = c.Indirection, c.Node
		}
	}
	feature := func(option, name string, on bool) {
		steps = append(steps, newStep(Step{Kind: StepFeature, Feature: option}, setFeature, option, name, onOff(on)))
	}
	if d == nil || hasEnum(d, "rx") {
		feature("rx", "rx-checksumming", rxcsum)
	}
	if d == nil || hasEnum(d, "tx") {
		feature("tx", "tx-checksumming", txcsum)
	}
	if len(rules) > 0 {
		feature("ntuple", "ntuple-filters", true)
	}
	if len(rss) > 0 && (d == nil || d.RSS == nil || d.RSS.SetTable) {
		weights := make([]int, nq)
		for _, target := range rss {
			if q := queueOf(r, target); q >= 0 && q < len(weights) {
				weights[q]++
			}
		}
		var want []string
		// The node's name is the model's identifier; one a foreign
		// model spells otherwise is shown with _ for what a row cannot
		// hold (it only names the step).
		args := []string{plainWord(rssNode), ""}
		for q, x := range weights {
			args = append(args, fmt.Sprint(x))
			if x > 0 {
				want = append(want, fmt.Sprint(q))
			}
		}
		args[1] = strings.Join(want, ",")
		steps = append(steps, newStep(Step{Kind: StepRSS, Node: rssNode}, setRSS, args...))
	}
	if len(rss) > 0 && d != nil && d.RSS != nil && d.RSS.Param != "" {
		steps = append(steps, newStep(Step{Kind: StepRSSPorts, Node: rssNode}, checkModuleParam, d.Name, d.RSS.Param, d.RSS.ParamValue))
	}
	if len(rss) > 0 && (d == nil || d.RSS != nil && d.RSS.UDPPorts) {
		steps = append(steps, newStep(Step{Kind: StepRSSPorts, Node: rssNode}, hashUDPPorts))
	}
	steps = append(steps, rules...)
	irq := bindIRQ(d, nq)
	for _, q := range pl.Queues {
		steps = append(steps, newStep(Step{Kind: StepIRQ, Queue: q.ID}, irq, fmt.Sprint(q.ID), fmt.Sprint(q.Core)))
	}
	for _, q := range pl.Queues {
		for _, m := range queueMasks {
			steps = append(steps, newStep(Step{Kind: m.step, Queue: q.ID, Core: q.Core}, m.kind, fmt.Sprint(q.ID), fmt.Sprint(q.Core), CPUMask(q.Core)))
		}
	}
	return steps, unsupported
}

// kindsOf lists the kinds the steps use, in order.
func kindsOf(steps []step) []*kind {
	var out []*kind
	seen := map[string]bool{}
	for _, st := range steps {
		if !seen[st.kind.name] {
			seen[st.kind.name] = true
			out = append(out, st.kind)
		}
	}
	return out
}

// A queueMask is a CPU mask the kernel keeps for each queue of an
// interface in /sys/class/net/IF/queues/DIR-N/FILE
// (Documentation/networking/scaling.rst). linux.sh sets it, for each
// queue of the plan, to the queue's planned core alone, so that the
// kernel's own processing of the queue's packets (what an ordinary
// program on a kernel socket gets) happens on that core even where the
// interrupt lands elsewhere (irqbalance, a refused affinity), and is
// restored by --undo. dragonc run applies the same steps, as it runs
// linux.sh.
type queueMask struct {
	step string // StepRPS or StepXPS
	kind *kind  // a step of it: the shell function queue_mask with the mask's words
}

// maskKind is the kind of step that sets the mask FILE of queue DIR-N;
// config is the kernel option without which the file is absent.
func maskKind(name, dir, file, config, what string) *kind {
	return &kind{
		name:   name,
		fields: []string{"queue", "core", "mask"},
		desc:   fmt.Sprintf("%s of queue $queue on core $core (%s-$queue/%s)", what, dir, file),
		doc:    fmt.Sprintf("sets the %s of QUEUE to CORE alone (MASK, %s-N/%s).", what, dir, file),
		body:   fmt.Sprintf("    queue_mask %s %s %s\n", dir, file, config),
		helper: queueMaskFn,
	}
}

// queueMasks are the masks linux.sh sets, in order.
var queueMasks = []queueMask{
	// RPS (scaling.rst, "RPS Configuration"): after the interrupt, the
	// packets of receive queue N go to the backlog of a CPU of rps_cpus
	// (get_rps_cpu), where the IP and transport layers run and the socket
	// is woken. With the planned core alone the protocol work stays
	// there; when the interrupt is on that core too, RPS costs one pass
	// through that core's backlog. net/core/net-sysfs.c, store_rps_map:
	// bitmap_parse reads hex with a comma every 32 bits, and a mask of
	// only isolated CPUs is EINVAL (rps_cpumask_housekeeping).
	{StepRPS, maskKind("set_rps", "rx", "rps_cpus", "CONFIG_RPS", "receive packet steering")},
	// XPS (scaling.rst, "XPS Configuration"): a CPU in xps_cpus of
	// transmit queue N sends on queue N (netdev_pick_tx through
	// get_xps_queue), so the queue's core answers on its own queue and
	// takes no other core's transmit lock. xps_cpus_store parses the same
	// format; xps_cpus_show and xps_cpus_store answer ENOENT on a device
	// with one transmit queue (netif_is_multiqueue).
	{StepXPS, maskKind("set_xps", "tx", "xps_cpus", "CONFIG_XPS", "transmit packet steering")},
}

// queueMaskFn is the shell function the mask kinds share: it writes
// $mask (core $core's) into the mask file of queue $queue.
const queueMaskFn = `# queue_mask DIR FILE CONFIG sets file FILE of queue DIR-$queue to $mask,
# core $core's; the kernel has FILE only when built with CONFIG.
queue_mask() {
    f="$sys/class/net/$ifc/queues/$1-$queue/$2"
    if [ "$dry" = 1 ]; then
        printf 'echo %s > %s\n' "$mask" "$(q "$f")"
        return 0
    fi
    # sysfs shows the interfaces of the network namespace that mounted it.
    [ -d "$sys/class/net/$ifc" ] || { fail "$sys/class/net/$ifc does not exist: this sysfs belongs to another network namespace (ip netns exec mounts the namespace's own)"; return; }
    [ -d "${f%/*}" ] || { fail "$ifc has no queue $1-$queue ($sys/class/net/$ifc/queues)"; return; }
    [ -e "$f" ] || { skip "the kernel has no $2 (it was built without $3)"; return; }
    old_mask=$(cat "$f" 2>/dev/null) || { skip "$2 of $1-$queue cannot be read (the kernel has it only on a device with several transmit queues)"; return; }
    { printf '%s\n' "$mask" >"$f"; } 2>/dev/null || { fail "the kernel refused mask $mask in $1-$queue/$2: core $core is not one of this machine's, or is isolated from the kernel's work (isolcpus, nohz_full)"; return; }
    if [ "$(norm <"$f")" != "$(printf '%s\n' "$mask" | norm)" ]; then
        fail "$1-$queue/$2 reads $(cat "$f") afterwards, not core $core's mask $mask (is core $core online?)"
        return
    fi
    record "printf '%s\\n' $(q "$old_mask") >$(q "$f")"
}
`

// ntupleRule renders a table entry as the words of ethtool -N after
// flow-type and the queue it sends to, when ethtool can express it (IPv4
// TCP/UDP matches).
func ntupleRule(e plan.Entry, r *embed.Result) (match []string, queue int, ok bool) {
	flow := ""
	for _, f := range e.Fields {
		if f.Field == "ip.proto" {
			switch f.Value {
			case 6:
				flow = "tcp4"
			case 17:
				flow = "udp4"
			}
		}
	}
	if flow == "" {
		return nil, 0, false
	}
	match = []string{flow}
	for _, f := range e.Fields {
		word := map[string]string{"ip.src": "src-ip", "ip.dst": "dst-ip", "l4.sport": "src-port", "l4.dport": "dst-port"}[f.Field]
		switch {
		case f.Field == "ip.proto":
			continue
		case word == "":
			return nil, 0, false
		}
		match = append(match, word, pred.FormatValue(f.Field, f.Value))
		if f.Mask != 0 {
			match = append(match, "m", pred.FormatValue(f.Field, ^f.Mask&fullMask(f.Field)))
		}
	}
	q := queueOf(r, e.Action)
	if q < 0 {
		return nil, 0, false
	}
	return match, q, true
}

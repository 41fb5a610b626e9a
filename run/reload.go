package run

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/run/dataplane"
)

// A run changes its endpoints while it serves (issue 39): Reload plans
// the new stack from the running plan (the incremental search keeps what
// did not change where it was), and applies the difference without a
// restart. The helper's generated code looks its endpoints up in swapped
// tables (gofallback's Options.Swappable), so a new plan whose code has
// the same shape (the same code but for those tables' entries) is a new
// set of tables for the running helper, sent as one line on its standard
// input and swapped between two frames; the eBPF stage's rules are map
// entries, inserted before the old ones are deleted. A new plan that
// needs other code (a new protocol, a queue's graph that changes shape)
// or another eBPF program is refused, and the old plan keeps serving.

// ReloadResult says what a reload did, or why it did nothing.
type ReloadResult struct {
	Seq     int    `json:"seq"`     // the reload's number in this run, from 1
	Applied bool   `json:"applied"` // the new plan serves
	Stack   string `json:"stack,omitempty"`
	// Error is why the new stack was refused: the old plan serves on.
	Error   string   `json:"error,omitempty"`
	Added   []string `json:"added,omitempty"`   // endpoints the new stack has and the old had not
	Removed []string `json:"removed,omitempty"` // the old stack's endpoints the new one has not
	Changed []string `json:"changed,omitempty"` // endpoints declared otherwise
	// Tables is how many of the generated code's tables were swapped;
	// the rules the eBPF stage's maps gained, changed and lost.
	Tables       int `json:"tables_swapped"`
	RulesAdded   int `json:"rules_added"`
	RulesChanged int `json:"rules_changed"`
	RulesRemoved int `json:"rules_removed"`
	// Restarted, if set, says why the data plane was restarted with the
	// new plan (new code, another eBPF program); PauseMS is how long
	// nothing served (from the old plan's end until the new one served).
	Restarted string  `json:"restarted,omitempty"`
	PauseMS   float64 `json:"pause_ms,omitempty"`
	// HandedOver says the new helper took the old one's sockets over
	// (handover.go): for PauseMS the frames that arrived waited on the
	// sockets' receive rings instead of being lost, and the eBPF
	// programs were swapped on their links and sockets, never detached.
	HandedOver bool `json:"handed_over,omitempty"`
	// Lost, with HandedOver, is how many frames the kernel dropped on
	// the sockets while they were handed over (AF_XDP: their
	// XDP_STATISTICS rx_dropped and rx_ring_full; AF_PACKET: their
	// PACKET_STATISTICS drops; from when the old helper stopped reading
	// until the new one served).
	Lost uint64 `json:"lost,omitempty"`
	// NIC is what a reload of a hardware plan did to the NIC's filter
	// rules (reloadhw.go).
	NIC *NICRules `json:"nic,omitempty"`
	// Short says the change took the short path (fastreload.go): a
	// change of the plan's session, applied without planning the stack
	// or generating code (PlanMS is the session's change, CodeMS
	// working out the tables' and rules' changes).
	Short bool `json:"short,omitempty"`
	// NotShort says why a change the session made did not take the
	// short path (the session's plan then went the full way).
	NotShort string `json:"not_short,omitempty"`
	// PlanMS is how long planning took, CodeMS generating the new
	// plan's code (and its stage), SwapMS handing the helper its tables
	// and updating the maps, TookMS the whole reload (in milliseconds).
	PlanMS float64 `json:"plan_ms"`
	CodeMS float64 `json:"code_ms"`
	SwapMS float64 `json:"swap_ms"`
	TookMS float64 `json:"took_ms"`
}

// String is the result as run and dragonc reload print it.
func (r *ReloadResult) String() string {
	if !r.Applied {
		return fmt.Sprintf("reload %d refused, the running plan serves on: %s", r.Seq, r.Error)
	}
	var parts []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"changed", r.Changed}} {
		if len(l.names) > 0 {
			parts = append(parts, l.what+" "+shortList(l.names))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no endpoint changed")
	}
	if r.NIC != nil {
		parts = append(parts, r.NIC.String())
	}
	if r.NotShort != "" {
		parts = append(parts, "not by the short path: "+r.NotShort)
	}
	if r.Restarted != "" && r.HandedOver {
		return fmt.Sprintf("reload %d applied to stack %s: %s; the data plane was handed over to new code (%s): its sockets held what arrived for %.1f ms, %d frame(s) lost; %.1f ms in all (planning %.1f, code %.1f, build and handover %.1f)",
			r.Seq, r.Stack, strings.Join(parts, ", "), r.Restarted, r.PauseMS, r.Lost, r.TookMS, r.PlanMS, r.CodeMS, r.SwapMS)
	}
	if r.Restarted != "" {
		return fmt.Sprintf("reload %d applied to stack %s: %s; the data plane was restarted with the new plan (%s): nothing was served for %.1f ms; %.1f ms in all (planning %.1f, code %.1f, build and handover %.1f)",
			r.Seq, r.Stack, strings.Join(parts, ", "), r.Restarted, r.PauseMS, r.TookMS, r.PlanMS, r.CodeMS, r.SwapMS)
	}
	if r.Short {
		return fmt.Sprintf("reload %d applied to stack %s: %s; %d table(s) changed, rules +%d ~%d -%d; %.1f ms without a restart or new code (the session's change %.1f, working out the tables and rules %.1f, applying them %.1f)",
			r.Seq, r.Stack, strings.Join(parts, ", "), r.Tables, r.RulesAdded, r.RulesChanged, r.RulesRemoved, r.TookMS, r.PlanMS, r.CodeMS, r.SwapMS)
	}
	return fmt.Sprintf("reload %d applied to stack %s: %s; %d table(s) swapped, rules +%d ~%d -%d; %.1f ms without a restart (planning %.1f, code %.1f, swap %.1f)",
		r.Seq, r.Stack, strings.Join(parts, ", "), r.Tables, r.RulesAdded, r.RulesChanged, r.RulesRemoved, r.TookMS, r.PlanMS, r.CodeMS, r.SwapMS)
}

// shortList names up to 10 names, and how many more.
func shortList(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, " ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], " "), len(names)-10)
}

// Live is a running Serve (Options.Live): a program drives its own
// changes with it.
type Live struct{ sv *serving }

// Reload serves st instead of the running stack: it plans st from the
// running plan (Options.Replan) and applies the difference while the old
// plan serves. A stack or plan it cannot apply returns a result with
// Error set (and no error): the old plan serves on. The error is for a
// failure while applying, after which the run stops.
func (l *Live) Reload(st *lpg.Stack) (*ReloadResult, error) { return l.sv.reload(st) }

// ReloadSource reads the stack again (Options.Restack) and reloads it,
// as SIGHUP and dragonc reload do.
func (l *Live) ReloadSource() (*ReloadResult, error) { return l.sv.reloadSource() }

// Replan is the default Options.Replan: st embedded by the incremental
// search from the running plan, with the running plan's cost function, on
// the running plan's NIC: linux-xdp, or a NIC's Linux driver (with
// run.Adapt's checksums), as dragonc run planned it.
func Replan(st *lpg.Stack, running *dembed.Result) (*dembed.Result, error) {
	nic := running.Plan.NIC
	m, mdiags, err := nics.Load(nic)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, mdiags
	}
	fn, err := costmodel.ByName(running.Plan.Cost.Function)
	if err != nil {
		return nil, err
	}
	opt := dembed.Options{Cost: fn, Strategy: dembed.StrategyIncremental, Previous: running.Plan}
	if nic != Model {
		opt.Target = dembed.TargetLinux
	}
	in, _, err := dembed.NewInput(nic, m, st, nil, opt)
	if err != nil {
		return nil, err
	}
	if nic != Model {
		Adapt(in)
	}
	return dembed.Run(in)
}

// refused is a reload the running plan survives: the reason is said.
type refused struct{ msg string }

func (e *refused) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &refused{fmt.Sprintf(format, args...)} }

// reloadSource is a reload of the stack as Options.Restack reads it.
func (sv *serving) reloadSource() (*ReloadResult, error) {
	if sv.opt.Restack == nil {
		sv.reloadMu.Lock()
		sv.reloads++
		res := &ReloadResult{Seq: sv.reloads, Error: "this run was given no stack file to read again (a Go program reloads with Live.Reload)"}
		sv.reloadMu.Unlock()
		sv.said(res)
		return res, nil
	}
	st, err := sv.opt.Restack()
	if err != nil {
		sv.reloadMu.Lock()
		sv.reloads++
		res := &ReloadResult{Seq: sv.reloads, Error: err.Error()}
		sv.reloadMu.Unlock()
		sv.said(res)
		return res, nil
	}
	return sv.reload(st)
}

// said tells the run's own output what a reload did.
func (sv *serving) said(res *ReloadResult) {
	kind := "reloaded"
	if !res.Applied {
		kind = "reload-refused"
	}
	sv.out.note(kind, "%s", res)
}

// reload plans st and applies it (Live.Reload).
func (sv *serving) reload(st *lpg.Stack) (*ReloadResult, error) {
	sv.reloadMu.Lock()
	sv.reloads++
	res := &ReloadResult{Seq: sv.reloads, Stack: st.Name}
	err := sv.apply(st, nil, res)
	sv.reloadMu.Unlock()
	return sv.reloaded(res, err)
}

// reloaded says what a reload did and returns it.
func (sv *serving) reloaded(res *ReloadResult, err error) (*ReloadResult, error) {
	var r *refused
	if errors.As(err, &r) {
		res.Error, err = r.msg, nil
	}
	if err == nil {
		res.Applied = res.Error == ""
		sv.said(res)
		return res, nil
	}
	res.Error = err.Error()
	sv.out.note("reload-failed", "reload %d failed while it was applied: %v", res.Seq, err)
	return res, err
}

// apply does the work of reload, under reloadMu: through the short path
// if it can (fastreload.go; op, if set, is the change in the session),
// otherwise by planning st from the plan served.
func (sv *serving) apply(st *lpg.Stack, op sessionOp, res *ReloadResult) error {
	start := time.Now()
	defer func() { res.TookMS = ms(time.Since(start)) }()
	if err := sv.reloadable(st); err != nil {
		return err
	}
	if fast, err := sv.tryFast(st, op, res); fast || err != nil {
		return err
	}
	// The plan served, made current if short-path changes are ahead of it.
	if err := sv.settle(); err != nil {
		return refuse("the plan of the last reloads: %v", err)
	}
	replan := sv.opt.Replan
	if replan == nil {
		replan = Replan
	}
	t := time.Now()
	r, err := replan(st, sv.r)
	res.PlanMS = ms(time.Since(t))
	if err != nil {
		return refuse("no plan for the new stack: %v", err)
	}
	return sv.applyPlanned(r, st, res)
}

// applyPlan serves plan r of stack st in place of the plan being served,
// as a reload does but without planning (a rebalance's new plan), and
// says so; the error says why it does not.
func (sv *serving) applyPlan(r *dembed.Result, st *lpg.Stack) error {
	return sv.rebalanced(func(res *ReloadResult) error {
		res.Stack = st.Name
		if err := sv.reloadable(st); err != nil {
			return err
		}
		if err := sv.settle(); err != nil {
			return err
		}
		if !slices.Equal(endpointNames(st), endpointNames(sv.st)) {
			// A reload served another stack while this plan was made.
			return refuse("the stack served changed while the plan was made")
		}
		return sv.applyPlanned(r, st, res)
	})
}

func endpointNames(st *lpg.Stack) []string {
	var out []string
	for _, e := range st.Endpoints {
		out = append(out, e.Name)
	}
	return out
}

// reloadable refuses a reload to st that this run cannot apply at all.
func (sv *serving) reloadable(st *lpg.Stack) error {
	switch {
	case sv.code == nil:
		return refuse("this run serves code linked into the program (ServeCode), which it cannot replace")
	}
	sv.liveMu.Lock()
	serving := sv.maps != nil && sv.send != nil
	sv.liveMu.Unlock()
	if !serving {
		return refuse("the stack is not served yet")
	}
	if len(st.Interfaces) != 1 || st.Interfaces[0].MAC != sv.st.Interfaces[0].MAC {
		return refuse("the new stack's interface is not the running one's (%s); restart dragonc run", macString(sv.st.Interfaces[0].MAC))
	}
	return nil
}

// applyPlanned applies plan r of stack st (reload's work after planning).
func (sv *serving) applyPlanned(r *dembed.Result, st *lpg.Stack, res *ReloadResult) error {
	// What needs the data plane restarted with new code, a new eBPF
	// program, or both.
	var needs []string
	if !reflect.DeepEqual(hostOf(st), hostOf(sv.st)) {
		needs = append(needs, "the stack's addresses or ICMP error limits differ")
	}
	if sv.hw || !r.SoftwareStage() {
		return sv.applyHardwarePlanned(r, st, res, needs) // reloadhw.go
	}
	t := time.Now()
	// The embedding's LPG is the new stack's (deriving it again would
	// cost as much as generating the code, at 10,000 endpoints).
	stage, err := stageOfLPG(r.Plan, st, sv.handled, r.Embedding.LPG)
	if err != nil {
		return refuse("the new plan's eBPF stage: %v", err)
	}
	if sv.opt.stageEdit != nil {
		sv.opt.stageEdit(stage)
	}
	if why := stageShapeDiff(sv.stage, stage); why != "" {
		needs = append(needs, "the eBPF program changes ("+why+")")
	}
	chains, vs, code, needs, err := sv.newCode(r, st, needs)
	if err != nil {
		return err
	}
	res.CodeMS = ms(time.Since(t))
	if len(needs) > 0 {
		res.Added, res.Removed, res.Changed = endpointDiff(sv.st, st)
		return sv.restart(planState{r: r, st: st, stage: stage, chains: chains, via: vs}, strings.Join(needs, "; "), res)
	}
	t = time.Now()
	defer func() { res.SwapMS = ms(time.Since(t)) }()
	res.Added, res.Removed, res.Changed = endpointDiff(sv.st, st)
	// The running helper's tables first: a new endpoint is served on
	// its queue before its rule steers frames there. An endpoint the
	// new plan moves to another queue stays in its old queue's table
	// until its rule points at the new one (the union), so that no
	// frame of it meets a table without it.
	keep := map[string]bool{}
	for _, e := range st.Endpoints {
		keep[e.Name] = true
	}
	union, exact := tableUpdates(sv.code.Tables, code.Tables, keep)
	if err := sv.push(st, union); err != nil {
		return err
	}
	res.Tables = len(exact)
	if err := sv.applyStageRules(stage, res); err != nil {
		return err
	}
	if !reflect.DeepEqual(union, exact) {
		if err := sv.pushFinal(st, exact); err != nil {
			return err
		}
	}
	sv.usePlan(planState{r: r, st: st, stage: stage, chains: chains, via: vs, code: code, bin: sv.bin})
	return nil
}

// applyStageRules writes stage's steering rules over the served stage's
// in the eBPF maps (new keys first, maps.applyRules) and counts them in
// res.
func (sv *serving) applyStageRules(stage *Stage, res *ReloadResult) error {
	sv.liveMu.Lock()
	m := sv.maps
	sv.liveMu.Unlock()
	if m == nil {
		return fmt.Errorf("the run stopped serving")
	}
	var err error
	res.RulesAdded, res.RulesChanged, res.RulesRemoved, err = m.applyRules(sv.stage.Groups, stage.Groups)
	if err != nil {
		return fmt.Errorf("updating the eBPF stage's rules: %w", err)
	}
	return nil
}

// newCode makes what plan r of stack st serves with besides its eBPF
// stage (its transmit paths, VI streams and generated code) and adds to
// needs what of it the running helper cannot take without new code.
func (sv *serving) newCode(r *dembed.Result, st *lpg.Stack, needs []string) (*Chains, *viaStreams, *gofallback.Swappable, []string, error) {
	chains, err := TxChains(r.Embedding.LPG, r.Plan, st)
	if err != nil {
		return nil, nil, nil, nil, refuse("%v", err)
	}
	vs, err := viaOf(r.Plan, st)
	if err != nil {
		return nil, nil, nil, nil, refuse("%v", err)
	}
	if !reflect.DeepEqual(chains, sv.chains) || !reflect.DeepEqual(vs, sv.via) {
		needs = append(needs, "the transmit paths or VI streams differ")
	}
	code, err := servedCode(r, st)
	if err != nil {
		return nil, nil, nil, nil, refuse("generating the new plan's code: %v", err)
	}
	if code.Shape != sv.code.Shape {
		needs = append(needs, "the generated code changes: "+codeDiff(sv.code, code))
	}
	return chains, vs, code, needs, nil
}

// servedCode is the code of plan r of stack st as a reload compares and
// serves it (gofallback's Options.Swappable).
func servedCode(r *dembed.Result, st *lpg.Stack) (*gofallback.Swappable, error) {
	return gofallback.GenerateSwappable(r, st, gofallback.Options{Source: "run", Module: "dragoncrun/fallback", NoTest: true})
}

// planState is what serving a plan needs that a reload changes.
type planState struct {
	r      *dembed.Result
	st     *lpg.Stack
	stage  *Stage
	chains *Chains
	via    *viaStreams
	code   *gofallback.Swappable
	bin    string
}

// usePlan makes p the plan served.
func (sv *serving) usePlan(p planState) {
	sv.r, sv.st, sv.stage, sv.chains, sv.via, sv.code, sv.bin = p.r, p.st, p.stage, p.chains, p.via, p.code, p.bin
	sv.name, sv.queues = p.st.Name, p.r.Plan.Queues
	// The short path's session and index start again from this plan.
	sv.sess, sv.byName, sv.behind = nil, nil, 0
	sv.planSeq++
	// The measured load is compared with the plan served, and the
	// rebalancer starts from it.
	if sv.rebalance != nil {
		sv.rebalance.served.Store(p.r)
	}
	sv.load.mu.Lock()
	if sv.load.meter != nil {
		sv.load.meter.Follow(p.r)
	}
	sv.load.mu.Unlock()
	if sv.state != nil {
		sv.state.Stack, sv.state.Reloads = p.st.Name, sv.reloads
		sv.state.Queues = nil
		for _, q := range sv.queues {
			sv.state.Queues = append(sv.state.Queues, QueueState{q.ID, q.Core})
		}
		if err := sv.saveState(); err != nil {
			sv.out.note("note", "the state of the run cannot be written: %v", err)
		}
	}
}

// handover is a reload that restarts the data plane with a new plan.
type handover struct {
	old, next planState
	start     time.Time     // when the old plan's serve was told to end
	pause     time.Duration // from start until the new plan served
	// live: the old helper hands its sockets over (handover.go)
	// instead of closing them; handedOver: it did.
	live, handedOver bool
	seq              int        // the handover's control line
	lost             uint64     // frames the kernel dropped while handed over
	done             chan error // nil once the new plan serves
}

// handoverTimeout bounds the wait for a new plan to serve.
const handoverTimeout = 2 * time.Minute

// restart serves next instead of the running plan by restarting the data
// plane: the new helper is built first, while the old plan serves (the
// go command, or the build cache), then the old plan's serve ends and
// the new one starts. Where it can (canHandOver), the old helper hands
// its sockets to the new one and the links stay attached (handover.go):
// what arrives in between waits on the sockets' rings. Otherwise the old
// plan's
// programs and sockets are detached (AF_XDP cannot bind a second socket
// to a queue, and the eBPF program holds the old maps) and what arrives
// in between is not served. The result says for how long. A new plan
// that cannot be served is said, and the old one serves again.
func (sv *serving) restart(next planState, why string, res *ReloadResult) error {
	t := time.Now()
	defer func() { res.SwapMS = ms(time.Since(t)) }()
	kern, err := kernelSockets(next.r.Plan, next.st, sv.handled)
	if err != nil {
		return refuse("%v", err)
	}
	if len(kern) > 0 {
		if err := kernelAddrMissing(sv.ifc, next.st); err != nil {
			return refuse("%v", err)
		}
	}
	files, code, err := helperFiles(next.r, next.st, next.chains, builtinHandlers(next.st), next.via)
	if err != nil {
		return refuse("generating the new plan's program: %v", err)
	}
	dir, err := os.MkdirTemp(sv.work, "reload-")
	if err != nil {
		return err
	}
	bin, err := sv.helperBinary(dir, files)
	if err != nil {
		return refuse("building the new plan's program: %v", err)
	}
	next.code, next.bin = code, bin
	h := &handover{next: next, done: make(chan error, 1)}
	sv.liveMu.Lock()
	cancel := sv.serveCancel
	if cancel == nil || sv.pending != nil {
		sv.liveMu.Unlock()
		return refuse("the stack is not served")
	}
	if h.live = sv.canHandOver(next); h.live {
		sv.pushSeq++
		h.seq = sv.pushSeq
	}
	h.old = planState{r: sv.r, st: sv.st, stage: sv.stage, chains: sv.chains, via: sv.via, code: sv.code, bin: sv.bin}
	h.start = time.Now()
	sv.pending = h
	sv.liveMu.Unlock()
	cancel()
	select {
	case err := <-h.done:
		if err != nil {
			return refuse("the new plan could not be served (%v); the previous plan serves again", err)
		}
	case <-time.After(handoverTimeout):
		return fmt.Errorf("the new plan did not serve within %v", handoverTimeout)
	}
	res.Restarted, res.PauseMS, res.HandedOver, res.Lost = why, ms(h.pause), h.handedOver, h.lost
	return nil
}

// handedOver tells a restart waiting for the new plan that it serves.
func (sv *serving) handedOver() {
	sv.liveMu.Lock()
	h := sv.handingOver
	sv.handingOver = nil
	sv.liveMu.Unlock()
	if h != nil {
		h.pause = time.Since(h.start)
		h.done <- nil
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// stageShapeDiff names what differs between two stages besides their
// rules, which the maps hold: what the XDP program's code depends on.
// "" when nothing does.
func stageShapeDiff(a, b *Stage) string {
	var diff []string
	if len(a.Groups) != len(b.Groups) {
		diff = append(diff, fmt.Sprintf("%d groups of rules instead of %d", len(b.Groups), len(a.Groups)))
	} else {
		for i := range a.Groups {
			x, y := a.Groups[i], b.Groups[i]
			if x.Table != y.Table || x.Mask != y.Mask || x.Ports != y.Ports || x.Capacity != y.Capacity {
				diff = append(diff, fmt.Sprintf("the rules of %s compare other fields", y.Table))
			}
		}
	}
	ac, bc := *a, *b
	ac.Groups, bc.Groups = nil, nil
	va, vb := reflect.ValueOf(ac), reflect.ValueOf(bc)
	for i := 0; i < va.NumField(); i++ {
		if f := va.Type().Field(i); f.IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			diff = append(diff, "its "+f.Name)
		}
	}
	return strings.Join(diff, ", ")
}

// codeDiff says why two plans' code differs in shape.
func codeDiff(a, b *gofallback.Swappable) string {
	if x, y := string(a.Files["fallback.go"]), string(b.Files["fallback.go"]); x != y {
		qa, qb := queuesLine(x), queuesLine(y)
		if qa != qb {
			return fmt.Sprintf("the plan's queues are %s instead of %s", qb, qa)
		}
		return "the software graph of a queue changes shape (an endpoint a queue's code cannot look up in a table: a queue that had none, another protocol, or a listener of another kind)"
	}
	return fmt.Sprintf("the generated code has %d endpoint tables instead of %d", len(b.Tables), len(a.Tables))
}

// queuesLine is the Queues declaration of generated code.
func queuesLine(src string) string {
	for _, l := range strings.Split(src, "\n") {
		if v, ok := strings.CutPrefix(l, "var Queues = [...]int"); ok {
			return v
		}
	}
	return "?"
}

// endpointDiff lists the endpoints added, removed and declared otherwise.
func endpointDiff(old, cur *lpg.Stack) (added, removed, changed []string) {
	was := map[string]*lpg.Endpoint{}
	for _, e := range old.Endpoints {
		was[e.Name] = e
	}
	is := map[string]bool{}
	for _, e := range cur.Endpoints {
		is[e.Name] = true
		switch w, ok := was[e.Name]; {
		case !ok:
			added = append(added, e.Name)
		case !sameEndpoint(*w, *e):
			changed = append(changed, e.Name)
		}
	}
	for _, e := range old.Endpoints {
		if !is[e.Name] {
			removed = append(removed, e.Name)
		}
	}
	return added, removed, changed
}

// sameEndpoint reports whether two declarations declare the same
// endpoint, wherever they are written.
func sameEndpoint(a, b lpg.Endpoint) bool {
	a.Pos, b.Pos = diag.Range{}, diag.Range{}
	return reflect.DeepEqual(a, b)
}

// tableUpdates are the tables of next that differ from cur's: exact, as
// next has them; union, with the entries of cur that next has not and
// that deliver to an endpoint the new stack keeps (one that moves queue).
func tableUpdates(cur, next []gofallback.Table, keep map[string]bool) (union, exact []gofallback.Table) {
	old := map[string][]gofallback.TableEntry{}
	for _, t := range cur {
		old[t.Name] = t.Entries
	}
	for _, t := range next {
		if slices.Equal(old[t.Name], t.Entries) {
			continue
		}
		exact = append(exact, t)
		have := map[[2]uint64]bool{}
		for _, e := range t.Entries {
			have[[2]uint64{e.K0, e.K1}] = true
		}
		u := gofallback.Table{Name: t.Name, Entries: slices.Clone(t.Entries)}
		for _, e := range old[t.Name] {
			if !have[[2]uint64{e.K0, e.K1}] && e.Kind == dataplane.Deliver && keep[e.Endpoint] {
				u.Entries = append(u.Entries, e)
			}
		}
		union = append(union, u)
	}
	return union, exact
}

// push sends the helper what differs between what it serves and the
// endpoints of st and tables, and waits for it to say they serve.
func (sv *serving) push(st *lpg.Stack, tables []gofallback.Table) error {
	return sv.sendUpdate(func(h *helperState) (*dataplane.Update, func()) { return h.update(st, tables) })
}

// pushFinal is push of the tables as the new plan has them, after the
// rules changed: the helper applies them once its loops served what
// their rings held (dataplane.Update.Drain), which the old rules may
// have steered to a queue whose entry goes.
func (sv *serving) pushFinal(st *lpg.Stack, tables []gofallback.Table) error {
	return sv.sendUpdate(drained(func(h *helperState) (*dataplane.Update, func()) { return h.update(st, tables) }))
}

// drained is diff with its update applied once the rings are drained
// (dataplane.Update.Drain).
func drained(diff func(*helperState) (*dataplane.Update, func())) func(*helperState) (*dataplane.Update, func()) {
	return func(h *helperState) (*dataplane.Update, func()) {
		u, commit := diff(h)
		if u != nil {
			u.Drain = true
		}
		return u, commit
	}
}

// sendUpdate sends the helper the update diff works out from what it
// serves, unless it changes nothing, waits for it to say it serves, and
// records it (diff's second result).
func (sv *serving) sendUpdate(diff func(*helperState) (*dataplane.Update, func())) error {
	sv.liveMu.Lock()
	hs, send := sv.hs, sv.send
	sv.liveMu.Unlock()
	if hs == nil || send == nil {
		return fmt.Errorf("the generated stack stopped")
	}
	u, commit := diff(hs)
	if len(u.Endpoints) == 0 && len(u.Tables) == 0 {
		return nil
	}
	sv.pushSeq++
	u.Seq = sv.pushSeq
	if err := send(u); err != nil {
		return err
	}
	commit()
	return nil
}

// helperState is what a running helper knows, mirrored here: the number
// it gave each endpoint, each endpoint's application, and the entries of
// each table an update gave it. An update is the difference from it.
type helperState struct {
	names  []string
	index  map[string]uint32
	app    []string
	omx    []bool
	tables map[string]map[dataplane.TableKey]dataplane.TableEntry
}

// appNames are the built-in applications by handler (builtinHandlers).
var appNames = map[string]string{"Echo": "echo", "Discard": "discard"}

// newHelperState is the state of a helper built for st: its endpoints
// numbered in the stack's order, its tables as generated (which its
// data plane has not been given).
func newHelperState(st *lpg.Stack) *helperState {
	h := &helperState{index: map[string]uint32{}, tables: map[string]map[dataplane.TableKey]dataplane.TableEntry{}}
	for i, handler := range builtinHandlers(st) {
		e := st.Endpoints[i]
		h.index[e.Name] = uint32(i)
		h.names = append(h.names, e.Name)
		h.app = append(h.app, appNames[handler])
		h.omx = append(h.omx, e.Proto == lpg.OpenMX)
	}
	return h
}

// update is the Update that makes the helper serve st's endpoints and
// tables (of st's plan, endpoints by name), and what records it here
// once the helper applied it.
func (h *helperState) update(st *lpg.Stack, tables []gofallback.Table) (*dataplane.Update, func()) {
	u := &dataplane.Update{}
	added := map[string]uint32{}
	n := uint32(len(h.names))
	for i, handler := range builtinHandlers(st) {
		e := st.Endpoints[i]
		ue := dataplane.UpdateEndpoint{Name: e.Name, App: appNames[handler], OpenMX: e.Proto == lpg.OpenMX}
		k, ok := h.index[e.Name]
		switch {
		case !ok:
			added[e.Name] = n
			n++
		case h.app[k] == ue.App && h.omx[k] == ue.OpenMX:
			continue
		}
		u.Endpoints = append(u.Endpoints, ue)
	}
	number := func(name string) uint32 {
		if k, ok := h.index[name]; ok {
			return k
		}
		return added[name]
	}
	want := map[string]map[dataplane.TableKey]dataplane.TableEntry{}
	for _, t := range tables {
		m := make(map[dataplane.TableKey]dataplane.TableEntry, len(t.Entries))
		for _, e := range t.Entries {
			index := e.Index
			if e.Kind == dataplane.Deliver {
				index = number(e.Endpoint)
			}
			if _, ok := m[dataplane.TableKey{K0: e.K0, K1: e.K1}]; !ok { // the first entry of a key wins
				m[dataplane.TableKey{K0: e.K0, K1: e.K1}] = dataplane.TableEntry{K0: e.K0, K1: e.K1, Kind: e.Kind, Index: index}
			}
		}
		want[t.Name] = m
		ut := dataplane.UpdateTable{Name: t.Name}
		cur, known := h.tables[t.Name]
		ut.Full = !known
		for k, e := range m {
			if c, ok := cur[k]; !ok || c != e {
				ut.Set = append(ut.Set, e)
			}
		}
		for k := range cur {
			if _, ok := m[k]; !ok {
				ut.Delete = append(ut.Delete, k)
			}
		}
		if ut.Full || len(ut.Set) > 0 || len(ut.Delete) > 0 {
			slices.SortFunc(ut.Set, func(a, b dataplane.TableEntry) int { return cmpKey(a.K0, a.K1, b.K0, b.K1) })
			slices.SortFunc(ut.Delete, func(a, b dataplane.TableKey) int { return cmpKey(a.K0, a.K1, b.K0, b.K1) })
			u.Tables = append(u.Tables, ut)
		}
	}
	return u, func() {
		h.served(u.Endpoints)
		for name, m := range want {
			h.tables[name] = m
		}
	}
}

// served records endpoints the helper was given: numbers for the new
// ones (after its own), each one's application.
func (h *helperState) served(eps []dataplane.UpdateEndpoint) {
	for _, e := range eps {
		k, ok := h.index[e.Name]
		if !ok {
			k = uint32(len(h.names))
			h.index[e.Name] = k
			h.names, h.app, h.omx = append(h.names, e.Name), append(h.app, ""), append(h.omx, false)
		}
		h.app[k], h.omx[k] = e.App, e.OpenMX
	}
}

func cmpKey(a0, a1, b0, b1 uint64) int {
	if c := cmp.Compare(a0, b0); c != 0 {
		return c
	}
	return cmp.Compare(a1, b1)
}

// helperTimeout bounds the wait for the helper's answer to an update.
const helperTimeout = 10 * time.Second

// helperControl is the control channel to a running helper: updates go
// out on its standard input, its answers come back on its output.
type helperControl struct {
	mu      sync.Mutex
	w       io.Writer
	waiting map[int]chan controlAnswer
}

// controlAnswer is the helper's answer to a control line: why it failed
// ("" if it did not) and what it answered besides (a handover's JSON).
type controlAnswer struct{ reason, payload string }

// send writes u and waits for the helper's answer.
func (h *helperControl) send(u *dataplane.Update) error {
	_, err := h.ask(u)
	return err
}

// ask writes u and waits for the helper's answer; it returns what the
// answer carries besides.
func (h *helperControl) ask(u *dataplane.Update) (string, error) {
	b, err := json.Marshal(u)
	if err != nil {
		return "", err
	}
	ch := make(chan controlAnswer, 1)
	h.mu.Lock()
	h.waiting[u.Seq] = ch
	_, err = h.w.Write(append(b, '\n'))
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiting, u.Seq)
		h.mu.Unlock()
	}()
	if err != nil {
		return "", fmt.Errorf("writing to the generated stack: %w", err)
	}
	select {
	case a := <-ch:
		if a.reason != "" {
			return "", fmt.Errorf("the generated stack refused the update: %s", a.reason)
		}
		return a.payload, nil
	case <-time.After(helperTimeout):
		return "", fmt.Errorf("the generated stack did not answer the update within %v", helperTimeout)
	}
}

// answer hands a control line of the helper ("applied SEQ", "failed
// SEQ: REASON" or "handover SEQ JSON") to the send waiting for it.
func (h *helperControl) answer(line string) bool {
	verb, rest, _ := strings.Cut(line, " ")
	var a controlAnswer
	num := rest
	switch verb {
	case "failed":
		num, a.reason, _ = strings.Cut(rest, ": ")
		if a.reason == "" {
			a.reason = "(no reason)"
		}
	case "handover":
		num, a.payload, _ = strings.Cut(rest, " ")
	case "applied":
	default:
		return false
	}
	seq, err := strconv.Atoi(num)
	if err != nil {
		return false
	}
	h.mu.Lock()
	ch := h.waiting[seq]
	h.mu.Unlock()
	if ch != nil {
		ch <- a
	}
	return true
}

// applyRules makes the stage's maps hold the rules of next instead of
// cur (groups of the same shape, stageShapeDiff): for each group, the new
// keys and changed queues first, then the keys next has not, so that a
// rule that both have is never missing. Only when the map would overflow
// its capacity in between do the removed keys go first (the removed
// rules' frames then meet the miss rule a little earlier). It counts the
// rules added, changed and removed.
func (m *maps) applyRules(cur, next []Group) (added, changed, removed int, err error) {
	for i, g := range next {
		a, c, r, err := m.applyGroup(i, cur[i], g)
		added, changed, removed = added+a, changed+c, removed+r
		if err != nil {
			return added, changed, removed, err
		}
	}
	return added, changed, removed, nil
}

// applyGroup makes map i hold the rules of group g instead of those of
// cur, as applyRules says.
func (m *maps) applyGroup(i int, cur, g Group) (added, changed, removed int, err error) {
	was, is := firstRules(cur.Rules), firstRules(g.Rules)
	mp := m.groups[i]
	var gone [][16]byte
	for k := range was {
		if _, ok := is[k]; !ok {
			gone = append(gone, k)
		}
	}
	del := func() error {
		for _, k := range gone {
			if err := mp.Delete(k[:]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("%s: %w", g.Table, err)
			}
			removed++
		}
		gone = nil
		return nil
	}
	if len(is)+len(gone) > g.Capacity {
		// was ∪ is does not fit the map.
		if err := del(); err != nil {
			return added, changed, removed, err
		}
	}
	for _, r := range g.Rules {
		q, ok := was[r.Key]
		switch {
		case ok && q == is[r.Key]:
			continue
		case ok:
			changed++
		default:
			added++
		}
		was[r.Key] = is[r.Key]
		if err := mp.Update(r.Key[:], is[r.Key], ebpf.UpdateAny); err != nil {
			return added, changed, removed, fmt.Errorf("%s: %w", g.Table, err)
		}
	}
	return added, changed, removed, del()
}

// firstRules are a group's keys and the queue of each key's first rule
// (the first rule of a key wins, as in newMaps).
func firstRules(rules []Rule) map[[16]byte]uint32 {
	m := make(map[[16]byte]uint32, len(rules))
	for _, r := range rules {
		if _, ok := m[r.Key]; !ok {
			m[r.Key] = r.Queue
		}
	}
	return m
}

// The control socket: `dragonc reload IFACE` connects to control.sock in
// the run's state directory, writes a request line and reads the result
// as one line of JSON on the same connection.

// ControlRequest is what dragonc reload asks.
type ControlRequest struct {
	Op string `json:"op"` // "reload"
}

// controlName is the socket's name in the state directory.
const controlName = "control.sock"

// listenControl opens the run's control socket; it returns what closes
// it. A state directory whose path is too long for a socket's address
// (108 bytes) gets none: the run says so and reloads on SIGHUP only.
func (sv *serving) listenControl() (string, func(), error) {
	path := filepath.Join(stateDir(sv.state.name), controlName)
	if len(path) >= 108 {
		sv.out.note("note", "no control socket: its path %s is longer than a socket's address may be; reload with SIGHUP", path)
		return "", func() {}, nil
	}
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return "", nil, fmt.Errorf("opening the control socket: %w", err)
	}
	os.Chmod(path, 0o600) // root's, as the run is
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go sv.control(c)
		}
	}()
	return path, func() { ln.Close(); <-done }, nil
}

// controlTimeout bounds a control connection: reading its request and
// writing its answer (a reload itself is bounded by helperTimeout).
const controlTimeout = 5 * time.Second

// control answers one connection to the control socket.
func (sv *serving) control(c *net.UnixConn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(controlTimeout))
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadBytes('\n')
	if err != nil {
		return
	}
	var req ControlRequest
	var res *ReloadResult
	switch err := json.Unmarshal(line, &req); {
	case err != nil:
		res = &ReloadResult{Error: fmt.Sprintf("the request does not read: %v", err)}
	case req.Op != "reload":
		res = &ReloadResult{Error: fmt.Sprintf("no operation %q (reload)", req.Op)}
	default:
		res, _ = sv.reloadSource()
	}
	b, _ := json.Marshal(res)
	c.SetWriteDeadline(time.Now().Add(controlTimeout))
	c.Write(append(b, '\n'))
}

// Reload asks the run on iface to read its stack file again and serve
// it (dragonc reload), and returns what it did. It waits at most
// timeout for the answer.
func Reload(ctx context.Context, iface string, timeout time.Duration) (*ReloadResult, error) {
	s, err := ReadState(iface)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usage("nothing runs on %s", iface)
	}
	if err != nil {
		return nil, err
	}
	if !s.Alive() {
		return nil, usage("the run on %s (pid %d) is gone; dragonc stop %s removes what it left", iface, s.PID, iface)
	}
	if s.Control == "" {
		return nil, usage("the run on %s has no control socket; send it SIGHUP (kill -HUP %d) and read its output", iface, s.PID)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", s.Control)
	if err != nil {
		return nil, fmt.Errorf("connecting to the run on %s: %w", iface, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(`{"op":"reload"}` + "\n")); err != nil {
		return nil, fmt.Errorf("asking the run on %s: %w", iface, err)
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("the run on %s did not answer within %v (it may still apply the reload: dragonc status %s, or its output, says)", iface, timeout, iface)
		}
		return nil, fmt.Errorf("reading the answer of the run on %s: %w", iface, err)
	}
	var res ReloadResult
	if err := json.Unmarshal(line, &res); err != nil {
		return nil, fmt.Errorf("the answer of the run on %s does not read: %w", iface, err)
	}
	return &res, nil
}

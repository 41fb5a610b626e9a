package run

import (
	"context"
	gomaps "maps"
	"slices"
	"strings"
	"time"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sovia"
)

// The data plane's types, for Go programs that serve a stack themselves.
type (
	// Handler serves a UDP or Open-MX endpoint: it returns the payload
	// to send back to the sender, or nil.
	Handler = dataplane.Handler
	// Datagram is a UDP datagram or an Open-MX message delivered to an
	// endpoint.
	Datagram = dataplane.Datagram
	// Code is the generated fallback package of a plan, as linked into
	// the calling program.
	Code = dataplane.Code
	// Verdict is the generated code's answer for a frame.
	Verdict = dataplane.Verdict
	// Report is a reading of a running stack's counters (Options.OnReport,
	// LatestReport).
	Report = dataplane.Report
)

// ServeCode serves the stack of r on opt.Iface until ctx ends, in this
// process: code is the fallback package `dragonc embed -o` generated for
// the same stack and NIC, linked into the calling program, and handlers
// serve UDP and Open-MX endpoints by name. One without a handler runs the
// built-in application its app attribute names (echo or discard; others
// discard). Programs load and sockets open as Serve's do, and everything
// is detached on return.
//
// A program links the package and calls it like this (fb is the
// generated package):
//
//	code := run.Code{
//		Process: func(q int, f []byte) run.Verdict {
//			v := fb.Process(q, f, fb.Meta{CRCOK: true})
//			return run.Verdict{Kind: uint8(v.Kind), Index: v.Index}
//		},
//		Endpoints: fb.EndpointNames[:], Replies: fb.Replies[:], Sinks: fb.Sinks[:],
//	}
//	for _, d := range fb.DropSites {
//		code.DropSites = append(code.DropSites, run.DropSite(d.Node, d.Port))
//	}
//	err := run.ServeCode(ctx, r, st, code, map[string]run.Handler{"dns": answer}, opt)
func ServeCode(ctx context.Context, r *dembed.Result, st *lpg.Stack, code Code, handlers map[string]Handler, opt Options) (err error) {
	if code.Process == nil {
		return usage("the code has no Process function")
	}
	// The code must be the one generated for this stack: its endpoints
	// are the stack's, in the stack's order.
	var want []string
	for _, e := range st.Endpoints {
		want = append(want, e.Name)
	}
	if !slices.Equal(code.Endpoints, want) {
		return usage("the code's endpoints (%s) are not stack %s's (%s): generate it from the same stack", strings.Join(code.Endpoints, ", "), st.Name, strings.Join(want, ", "))
	}
	hs := make([]Handler, len(st.Endpoints))
	for i, e := range st.Endpoints {
		if e.Proto == lpg.TCP {
			continue
		}
		switch h, ok := handlers[e.Name]; {
		case ok && h != nil:
			hs[i] = h
		case e.App == "echo":
			hs[i] = dataplane.Echo
		default:
			hs[i] = dataplane.Discard
		}
	}
	for _, name := range slices.Sorted(gomaps.Keys(handlers)) {
		i := slices.Index(want, name)
		if i < 0 {
			return usage("a handler for %s, which is not an endpoint of stack %s", name, st.Name)
		}
		if st.Endpoints[i].Proto == lpg.TCP {
			return usage("a handler for %s, a TCP endpoint: dragonc has no TCP of its own, so a TCP endpoint is a kernel-socket endpoint (its program's frames go to the kernel on its planned core)", name)
		}
	}
	handled := map[string]bool{}
	for name, h := range handlers {
		handled[name] = h != nil
	}
	sv, err := prepare(ctx, r, st, &opt, handled)
	if err != nil {
		return err
	}
	defer func() { sv.stopped(err) }()
	for _, name := range slices.Sorted(gomaps.Keys(opt.Streams)) {
		if _, ok := sv.via.stream(name); !ok {
			return usage("a stream handler for %s, which the plan does not put on a VI", name)
		}
	}
	dst, err := dataplane.Wire(code, *sv.chains, hs, hostOf(st))
	if err != nil {
		return err
	}
	if sv.via != nil {
		app := func(name string) func(*sovia.Conn) {
			if f := opt.Streams[name]; f != nil {
				return f
			}
			return sovia.Apps[sv.via.apps[name]]
		}
		// As the helper program's (mainFile): the VIs on a packet
		// socket of their own, read by the goroutines that wait on them.
		dst.OpenVIs = func(ifname string, spin time.Duration) (dataplane.VIs, error) {
			host, err := sovia.OpenHostWith(ifname, dst.MAC[:], sovia.HostOptions{BusyPoll: spin})
			if err != nil {
				return dataplane.VIs{}, err
			}
			if err := sovia.ServeStreams(host, sv.via.streams, app); err != nil {
				host.Close()
				return dataplane.VIs{}, err
			}
			return dataplane.VIs{Link: func() dataplane.VILink { return dataplane.VILink(host.LinkCounts()) }, SetupDrops: host.EachSetupCount, Close: host.Close}, nil
		}
	}
	sv.run = func(kind, how string, cfg dataplane.Config) error {
		srv, err := dataplane.Start(dst, cfg)
		if err != nil {
			if kind == dataplane.AFXDP {
				return &startError{err}
			}
			return err
		}
		for _, n := range srv.Notes {
			sv.out.note("note", "%s", n)
		}
		sv.ready(kind, how)
		return srv.Watch(sv.report, opt.Every, nil, ctx.Done())
	}
	return sv.serveAll()
}

// DropSite spells a generated package's drop site as Code.DropSites
// wants it.
func DropSite(node, port string) string {
	if node == "" {
		return ""
	}
	return node + "." + port
}

// Plan embeds a stack file's source (name is for its diagnostics) on the
// linux-xdp model as `dragonc embed linux-xdp` does with its defaults
// (embed.NewInput's: the balance cost, the default strategy, I/OAT for
// bulk copies).
func Plan(name string, src []byte) (*dembed.Result, *lpg.Stack, error) {
	return PlanCost(name, src, dembed.DefaultCost)
}

// PlanCost is Plan with the cost function cost (a name costmodel.ByName
// knows, as `dragonc embed --cost` takes).
func PlanCost(name string, src []byte, cost string) (*dembed.Result, *lpg.Stack, error) {
	st, diags := lpg.LoadStack(name, src)
	if st == nil {
		return nil, nil, diags
	}
	m, mdiags, err := nics.Load(Model)
	if err != nil {
		return nil, nil, err
	}
	if m == nil {
		return nil, nil, mdiags
	}
	fn, err := costmodel.ByName(cost)
	if err != nil {
		return nil, nil, err
	}
	// No warnings: linux-xdp restricts nothing by driver, and the built-in
	// copy engine has none.
	in, _, err := dembed.NewInput(Model, m, st, nil, dembed.Options{Cost: fn})
	if err != nil {
		return nil, nil, err
	}
	r, err := dembed.Run(in)
	if err != nil {
		return nil, nil, err
	}
	return r, st, nil
}

package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errLinkGone ends a run whose interface left its network namespace.
var errLinkGone = errors.New("went away")

// linkState is what a run says of its interface: whether frames can
// pass.
type linkState string

const (
	linkUp        linkState = "up"
	linkDown      linkState = "down"       // set down (IFF_UP clear)
	linkNoCarrier linkState = "no-carrier" // up, but not running: no carrier (a veth whose peer is down)
	linkGone      linkState = "gone"       // deleted, or moved to another namespace
)

// stateOf reads a link's state from its flags (netdevice(7): IFF_UP is
// the administrative state, IFF_RUNNING the operational one).
func stateOf(flags uint32) linkState {
	switch {
	case flags&unix.IFF_UP == 0:
		return linkDown
	case flags&unix.IFF_RUNNING == 0:
		return linkNoCarrier
	}
	return linkUp
}

// linkChange is the state an rtnetlink message gives interface index,
// or "" when it says nothing of it (rtnetlink(7): RTM_NEWLINK and
// RTM_DELLINK carry a struct ifinfomsg).
func linkChange(m syscall.NetlinkMessage, index int) linkState {
	if m.Header.Type != unix.RTM_NEWLINK && m.Header.Type != unix.RTM_DELLINK {
		return ""
	}
	if len(m.Data) < unix.SizeofIfInfomsg {
		return ""
	}
	info := (*unix.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
	if int(info.Index) != index {
		return ""
	}
	if m.Header.Type == unix.RTM_DELLINK {
		return linkGone
	}
	return stateOf(info.Flags)
}

// linkNotes are what a run says when its interface changes state.
var linkNotes = map[linkState]string{
	linkUp:        "%s is up again: serving",
	linkDown:      "%s is down: nothing is received or sent until it is up again (ip link set dev %[1]s up)",
	linkNoCarrier: "%s has no carrier: nothing is received or sent until it has",
	linkGone:      "%s went away (deleted, or moved to another network namespace): stopping",
}

// watchLink follows the interface through rtnetlink (the RTMGRP_LINK
// group, rtnetlink(7)) while the stack is served: it says when the
// interface goes down or loses its carrier and when it is up again (the
// receive loops wait meanwhile), and ends the run, with errLinkGone as
// the cause, when the interface leaves the namespace. It must be called
// in the interface's namespace; stop ends the watch.
func (sv *serving) watchLink(end context.CancelCauseFunc) (stop func(), err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("following %s: a netlink socket: %w", sv.opt.Iface, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("following %s: joining rtnetlink's link group: %w", sv.opt.Iface, err)
	}
	f := os.NewFile(uintptr(fd), "rtnetlink") // non-blocking: read through Go's poller, which Close wakes
	index, name := sv.ifc.Index, sv.opt.Iface
	done := make(chan struct{})
	go func() {
		defer close(done)
		was := stateOf(uint32(sv.ifc.Flags))
		say := func(s linkState) {
			if s == "" || s == was {
				return
			}
			was = s
			msg := fmt.Sprintf(linkNotes[s], name)
			sv.out.linkNote(name, s, msg)
			if s == linkGone {
				end(fmt.Errorf("interface %s %w", name, errLinkGone))
			}
		}
		buf := make([]byte, 1<<16)
		for was != linkGone {
			n, err := f.Read(buf)
			if errors.Is(err, syscall.ENOBUFS) {
				// The socket overran and lost messages: look.
				ifc, err := net.InterfaceByIndex(index)
				if err != nil {
					say(linkGone)
				} else {
					say(stateOf(uint32(ifc.Flags)))
				}
				continue
			}
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					sv.out.note("note", "following %s through rtnetlink: %v; its going down or away is no longer reported", name, err)
				}
				return
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				continue // not a whole message: nothing to read from it
			}
			for _, m := range msgs {
				say(linkChange(m, index))
			}
		}
	}()
	return func() { f.Close(); <-done }, nil
}

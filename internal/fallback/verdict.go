package fallback

// Kind is what happened to a frame.
type Kind uint8

// Outcomes.
const (
	Drop    Kind = iota // a check failed or nothing wanted the frame
	Deliver             // an endpoint received it
	Reply               // the stack answers it
	Sink                // a named sink took it
)

// Verdict is the fate of one frame in eight bytes: what happened and an
// index whose meaning depends on Kind: the endpoint (Deliver), an entry of
// Replies (Reply), of Sinks (Sink) or of DropSites (Drop; 0 is a drop with
// no named site). Verdicts compare with ==; String spells one out.
type Verdict struct {
	Kind  Kind
	Index uint32
}

// Endpoint is the endpoint that received the frame (Kind Deliver).
func (v Verdict) Endpoint() Endpoint { return Endpoint(v.Index) }

// String writes the verdict as dragonc's reference interpreter does:
// "deliver NAME", "reply arp", "sink NODE", "drop NODE.PORT" or "drop".
func (v Verdict) String() string {
	switch v.Kind {
	case Deliver:
		if int(v.Index) < len(EndpointNames) {
			return "deliver " + EndpointNames[v.Index]
		}
	case Reply:
		if int(v.Index) < len(Replies) {
			return "reply " + Replies[v.Index]
		}
	case Sink:
		if int(v.Index) < len(Sinks) {
			return "sink " + Sinks[v.Index]
		}
	case Drop:
		if int(v.Index) < len(DropSites) {
			s := DropSites[v.Index]
			if s.Node == "" {
				return "drop"
			}
			return "drop " + s.Node + "." + s.Port
		}
	}
	return "(invalid verdict)"
}

// A DropSite is the LPG node, and its port, where frames are dropped.
type DropSite struct{ Node, Port string }

// Flags are the verdicts the NIC reports in the receive descriptor, one
// bit per check (the Flag constants).
type Flags uint64

// Meta is what the NIC reports with a frame.
type Meta struct {
	CRCOK      bool  // the Ethernet CRC was good
	Flags      Flags // descriptor verdicts
	RSSHash    uint32
	HasRSSHash bool
}

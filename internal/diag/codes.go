package diag

import "strings"

// The diagnostic catalogue: every code dragonc reports, written once. A
// code is stable (tests, scripts and users match on it); its letter is
// its severity (E error, W warning), its first digit the phase that finds
// it: 1 reading (characters, tokens, syntax), 2 names, 3 node bodies and
// types, 4 NIC models, 5 stack files. Package code never spells a code as
// a literal (TestNoCodeLiterals), every code is produced by the test
// corpus (TestCatalogueEmitted, in the repository's root package), and
// docs/diagnostics.md is generated from Catalogue (TestDiagnosticsDoc).
const (
	CodeUTF8          = "E100"
	CodeLex           = "E101"
	CodeOpenComment   = "E102"
	CodeOpenString    = "E103"
	CodeEscape        = "E104"
	CodeSyntax        = "E110"
	CodeTooDeep       = "E111"
	CodeTooLarge      = "E112"
	CodeBOM           = "E113"
	CodeUnclosed      = "E114"
	CodeUnknownNode   = "E201"
	CodeTooManyDots   = "E202"
	CodeReserved      = "E203"
	CodeBadName       = "E204"
	CodeDupPort       = "E205"
	CodeUnknownPort   = "E206"
	CodeBadRange      = "E207"
	CodeDupNode       = "W201"
	CodeGatePorts     = "E301"
	CodeGateBody      = "E302"
	CodeConfigOnly    = "E303"
	CodeRepeated      = "E304"
	CodeBadPredicate  = "E310"
	CodeOpaqueValue   = "W311"
	CodeAtomNode      = "W312"
	CodeAtomPort      = "W313"
	CodeBadType       = "E320"
	CodeBadBounds     = "E321"
	CodeCycle         = "E330"
	CodeUnreachable   = "W331"
	CodeEmptyGraph    = "W333"
	CodeBadValue      = "E340"
	CodeBadConfig     = "E401"
	CodeDupQueue      = "E402"
	CodeTooManyQueues = "E403"
	CodeUnknownLabel  = "W403"
	CodeNotATable     = "E404"
	CodeForeignAtom   = "E405"
	CodeDupStackName  = "E501"
	CodeBadPort       = "E502"
	CodeBadAddr       = "E503"
	CodeBadMAC        = "E504"
	CodeBadOMX        = "E505"
	CodeNotOurs       = "E506"
	CodeBadCore       = "E507"
	CodeBadKind       = "E508"
	CodeBadAttr       = "E509"
	CodeConflict      = "E510"
	CodeBadService    = "E511"
	CodeNoInterface   = "E512"
	CodeBadNumber     = "E513"
	CodeIPv6          = "E515"
	CodeDerive        = "E599"
	CodeIdentClash    = "W502"
	CodeShadowed      = "W503"
)

// Entry is one code of the catalogue: what it means, in one line.
type Entry struct {
	Code    string
	Meaning string
	// Internal marks a code no input should produce: an invariant of
	// dragonc itself broke. It is reported, not panicked on, so that the
	// user sees the file it happened on; no test can produce it.
	Internal bool
}

// Severity is the severity a code carries: its letter.
func (e Entry) Severity() Severity { return SeverityOf(e.Code) }

// SeverityOf is a code's severity: W is a warning, anything else an error.
func SeverityOf(code string) Severity {
	if strings.HasPrefix(code, "W") {
		return Warning
	}
	return Error
}

// Catalogue lists every code in the order of the documentation.
var Catalogue = []Entry{
	{Code: CodeUTF8, Meaning: "the file is not valid UTF-8"},
	{Code: CodeLex, Meaning: "a character that begins no token (outside strings and comments, names are ASCII)"},
	{Code: CodeOpenComment, Meaning: "a /* block comment is never closed"},
	{Code: CodeOpenString, Meaning: "a string literal is not closed on its line"},
	{Code: CodeEscape, Meaning: "a string literal holds an unknown escape"},
	{Code: CodeSyntax, Meaning: "a syntax error: what was found, what was expected there, and the likely word"},
	{Code: CodeTooDeep, Meaning: "brackets or types nest deeper than dragonc reads"},
	{Code: CodeTooLarge, Meaning: "the file is larger than dragonc reads"},
	{Code: CodeBOM, Meaning: "the file starts with a UTF-8 byte-order mark"},
	{Code: CodeUnclosed, Meaning: "the file ends inside a bracket; the bracket never closed is named"},
	{Code: CodeUnknownNode, Meaning: "a reference names no node (with the likely name)"},
	{Code: CodeTooManyDots, Meaning: "a reference goes up more clusters than enclose it"},
	{Code: CodeReserved, Meaning: "a reserved word names a node, cluster or port"},
	{Code: CodeBadName, Meaning: "a name or reference that is not valid where it is written"},
	{Code: CodeDupPort, Meaning: "a node declares a port twice"},
	{Code: CodeUnknownPort, Meaning: "a predicate, constraint or semantics names a port the node lacks"},
	{Code: CodeBadRange, Meaning: "a numbered range of nodes or targets is malformed"},
	{Code: CodeDupNode, Meaning: "a node's full name is declared twice; references bind to the first"},
	{Code: CodeGatePorts, Meaning: "a boolean node or gate does not have exactly the ports true and false"},
	{Code: CodeGateBody, Meaning: "a gate's body holds an item only F-nodes and C-nodes take"},
	{Code: CodeConfigOnly, Meaning: "a configuration item on a node that is not a config node"},
	{Code: CodeRepeated, Meaning: "an item that may appear once appears twice"},
	{Code: CodeBadPredicate, Meaning: "a predicate does not parse or names an unknown field"},
	{Code: CodeOpaqueValue, Meaning: "a Unicorn predicate value dragonc does not know; it stays opaque"},
	{Code: CodeAtomNode, Meaning: "pred(NODE,PORT) names no node of the graph; it stays an opaque atom"},
	{Code: CodeAtomPort, Meaning: "pred(NODE,PORT) names a port the node lacks"},
	{Code: CodeBadType, Meaning: "a configuration type is malformed"},
	{Code: CodeBadBounds, Meaning: "a list length bound is malformed"},
	{Code: CodeCycle, Meaning: "normal edges form a cycle"},
	{Code: CodeUnreachable, Meaning: "a node no source reaches"},
	{Code: CodeEmptyGraph, Meaning: "a graph declares no nodes"},
	{Code: CodeBadValue, Meaning: "a property value of the wrong kind, or out of range"},
	{Code: CodeBadConfig, Meaning: "a configuration node's table, hash, place or enum settings are invalid"},
	{Code: CodeDupQueue, Meaning: "two receive queues have the same number"},
	{Code: CodeTooManyQueues, Meaning: "a Dragonet configRxQueues would build too many queue nodes"},
	{Code: CodeUnknownLabel, Meaning: "a Dragonet port label dragonc knows no meaning for; it stays opaque"},
	{Code: CodeNotATable, Meaning: "a task serves something that is not a table of the model"},
	{Code: CodeForeignAtom, Meaning: "a NIC predicate names a node neither the model nor the LPG has"},
	{Code: CodeDupStackName, Meaning: "a stack declares a name (an endpoint, cores) twice"},
	{Code: CodeBadPort, Meaning: "a port number or port range is out of range"},
	{Code: CodeBadAddr, Meaning: "a malformed IPv4 address or prefix"},
	{Code: CodeBadMAC, Meaning: "a malformed or multicast MAC address"},
	{Code: CodeBadOMX, Meaning: "an Open-MX endpoint id outside 0..255"},
	{Code: CodeNotOurs, Meaning: "an endpoint's address belongs to no interface of the stack"},
	{Code: CodeBadCore, Meaning: "a core outside the stack's cores"},
	{Code: CodeBadKind, Meaning: "an unknown endpoint kind"},
	{Code: CodeBadAttr, Meaning: "an unknown or malformed endpoint attribute"},
	{Code: CodeConflict, Meaning: "two endpoints receive the same packets"},
	{Code: CodeBadService, Meaning: "an unknown service, or a setting it does not take"},
	{Code: CodeNoInterface, Meaning: "a stack declares no interface"},
	{Code: CodeBadNumber, Meaning: "a rate, size or limit out of range or without its unit"},
	{Code: CodeIPv6, Meaning: "an IPv6 address where dragonc takes IPv4"},
	{Code: CodeDerive, Meaning: "deriving the LPG of a valid stack failed: a dragonc bug, please report it", Internal: true},
	{Code: CodeIdentClash, Meaning: "two endpoint names become the same identifier in generated code; the second is numbered"},
	{Code: CodeShadowed, Meaning: "a listener can never receive a packet: other endpoints take every address it listens on"},
}

// Lookup returns the catalogue's entry of a code.
func Lookup(code string) (Entry, bool) {
	for _, e := range Catalogue {
		if e.Code == code {
			return e, true
		}
	}
	return Entry{}, false
}

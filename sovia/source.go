package sovia

import "embed"

// Source is the package's own source. `dragonc run` ships it, with the
// data plane, into the program it builds around the generated code, which
// is why the package uses only the standard library.
//
//go:embed *.go
var Source embed.FS

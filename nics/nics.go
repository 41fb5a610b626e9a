// Package nics holds the built-in NIC and host-engine models as dragonc
// files, embedded in the binary, and resolves a NIC argument: a built-in
// name or a path to a .prg or .unicorn file.
package nics

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/prg"
)

//go:embed *.prg dragonet/*.unicorn dragonet/LICENCE.Dragonet
var files embed.FS

// dragonetModels are Dragonet's own models, shipped unchanged under their
// published file names (nics/dragonet/README.md).
var dragonetModels = map[string]string{
	"dragonet-e10k": "dragonet/prgE10kImpl.unicorn",
	"dragonet-sf":   "dragonet/prgSFImpl.unicorn",
}

// Builtin is one embedded model.
type Builtin struct {
	Name string // what users type: 82599
	File string // nics/82599.prg
}

// List returns the built-in models in name order.
func List() []Builtin {
	entries, _ := files.ReadDir(".")
	var out []Builtin
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".prg")
		out = append(out, Builtin{Name: name, File: "nics/" + e.Name()})
	}
	for name, file := range dragonetModels {
		out = append(out, Builtin{Name: name, File: "nics/" + file})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the built-in model names.
func Names() []string {
	var out []string
	for _, b := range List() {
		out = append(out, b.Name)
	}
	return out
}

// IsBuiltin reports whether a NIC argument names a built-in model.
func IsBuiltin(name string) bool {
	_, ok := Source(name)
	return ok
}

// path is the embedded file of a built-in model.
func path(name string) string {
	if f, ok := dragonetModels[name]; ok {
		return f
	}
	return name + ".prg"
}

// Source returns a built-in model's text.
func Source(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return nil, false
	}
	b, err := files.ReadFile(path(name))
	return b, err == nil
}

// Load resolves a NIC argument (Resolve) and builds its model. The
// diagnostics of a built-in model are its errors only: its warnings are
// known and documented (Dragonet's E10k and Solarflare files declare
// TxQueue3 twice), and users cannot act on them. The model is nil when
// there are errors; err is a NIC that cannot be read.
func Load(arg string) (*prg.Model, diag.List, error) {
	file, src, err := Resolve(arg)
	if err != nil {
		return nil, nil, err
	}
	m, diags := prg.Load(file, src)
	if IsBuiltin(arg) {
		diags = slices.DeleteFunc(diags, func(d diag.Diagnostic) bool { return d.Severity != diag.Error })
	}
	return m, diags, nil
}

// MaxModel bounds a model file (the same limit as the language's).
const MaxModel = 64 << 20

// Resolve reads a NIC argument: a built-in name, or a path to a file. It
// returns the name to show in diagnostics and the text.
func Resolve(arg string) (file string, src []byte, err error) {
	if b, ok := Source(arg); ok {
		return "nics/" + path(arg), b, nil
	}
	if strings.ContainsAny(arg, "/\\") || filepath.Ext(arg) != "" {
		st, err := os.Stat(arg)
		switch {
		case err == nil && !st.Mode().IsRegular():
			return "", nil, fmt.Errorf("%s is not a regular file", arg)
		case err == nil && st.Size() > MaxModel:
			return "", nil, fmt.Errorf("%s is %d bytes; a model is at most %d MiB", arg, st.Size(), MaxModel>>20)
		}
		b, err := os.ReadFile(arg)
		if err != nil {
			if os.IsNotExist(err) {
				return "", nil, fmt.Errorf("%s: no such file", arg)
			}
			return "", nil, fmt.Errorf("%s: %w", arg, err)
		}
		return arg, b, nil
	}
	msg := fmt.Sprintf("unknown NIC %q; built-in models are %s, or give a path to a .prg or .unicorn file", arg, strings.Join(Names(), ", "))
	if s := closest(arg, Names()); s != "" {
		msg = fmt.Sprintf("unknown NIC %q; did you mean %q? (built-in models: %s)", arg, s, strings.Join(Names(), ", "))
	}
	return "", nil, fmt.Errorf("%s", msg)
}

func closest(name string, cands []string) string {
	for _, c := range cands {
		if strings.Contains(c, name) || strings.Contains(name, c) {
			return c
		}
	}
	return ""
}

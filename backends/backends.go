// Package backends renders every file `dragonc embed -o` writes from an
// embedding: the Linux script, the NIC-specific files, the Graphviz
// picture, plan.json and the generated Go package. Each file's format
// belongs to the package named for it; this one holds the list.
package backends

import (
	"bytes"
	"fmt"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/backends/nicconf"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

// Files renders every file of `dragonc embed -o` by its path in the
// output directory; source is the stack file's name as the files cite it.
func Files(r *embed.Result, st *lpg.Stack, source string) (map[string][]byte, error) {
	// The Go fallback, the longest to make, is generated while the other
	// files are written: they only read the result.
	var fb map[string][]byte
	var fbErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				fbErr = fmt.Errorf("internal error: %v", p)
			}
		}()
		fb, fbErr = gofallback.Generate(r, st, gofallback.Options{Source: source, Seed: 1})
	}()
	files := map[string][]byte{}
	files["linux.sh"] = []byte(linux.Script(r, source))
	for name, data := range nicconf.Files(r, source) {
		files[name] = data
	}
	files["embedding.dot"] = []byte(dot.Plan(r))
	<-done
	if fbErr != nil {
		return nil, fbErr
	}
	// plan.json (100 MB at 100,000 endpoints) is written once the
	// generator's working memory is free.
	var b bytes.Buffer
	if err := r.Plan.WriteJSON(&b); err != nil {
		return nil, err
	}
	files["plan.json"] = b.Bytes()
	for name, data := range fb {
		files["fallback/"+name] = data
	}
	return files, nil
}

package main

import (
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a bar on standard error while a long command runs, only
// when standard error is a terminal and --quiet is not given.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(e *env, quiet bool, total int, what string) *progress {
	f, ok := e.stderr.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000), // redraw at most every 0.1 s
	)}
}

// set moves the bar to done (of the total it was made with).
func (p *progress) set(done int) {
	if p.bar != nil {
		p.bar.Set(done)
	}
}

// describe changes the label.
func (p *progress) describe(what string) {
	if p.bar != nil {
		p.bar.Describe(what)
	}
}

// done removes the bar.
func (p *progress) done() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}

// Package embedtest builds embeddings for the tests of the packages that
// consume them (sim, backends, verify, bench), the way net/http/httptest
// serves the tests of HTTP code. It stops the test on any failure.
package embedtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

// Model loads a built-in NIC model (or a model file) by name.
func Model(t testing.TB, nic string) *prg.Model {
	t.Helper()
	m, diags, err := nics.Load(nic)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		t.Fatal(diags)
	}
	return m
}

// Plan embeds the stack file named name, with source src, on nic under the
// cost function with the default strategy.
func Plan(t testing.TB, nic, name string, src []byte, cost costmodel.Function) (*embed.Result, *lpg.Stack) {
	t.Helper()
	return plan(t, nic, name, src, cost, embed.TargetSilicon)
}

// PlanTarget is Plan for a target: "silicon" (the whole PRG, as Plan) or
// "linux" (only what the model's Linux driver exposes; the model must
// name a driver dragonc knows).
func PlanTarget(t testing.TB, nic, path string, cost costmodel.Function, target string) (*embed.Result, *lpg.Stack) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return plan(t, nic, path, src, cost, target)
}

// PlanSourceTarget is PlanTarget for a stack given as source.
func PlanSourceTarget(t testing.TB, nic, name string, src []byte, cost costmodel.Function, target string) (*embed.Result, *lpg.Stack) {
	t.Helper()
	return plan(t, nic, name, src, cost, target)
}

func plan(t testing.TB, nic, name string, src []byte, cost costmodel.Function, target string) (*embed.Result, *lpg.Stack) {
	t.Helper()
	st, diags := lpg.LoadStack(name, src)
	if st == nil {
		t.Fatal(diags)
	}
	in, warnings, err := embed.NewInput(nic, Model(t, nic), st, nil, embed.Options{Cost: cost, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	r, err := embed.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

// PlanFile is Plan for the stack file at path.
func PlanFile(t testing.TB, nic, path string, cost costmodel.Function) (*embed.Result, *lpg.Stack) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Plan(t, nic, path, src, cost)
}

// Stacks loads every stack file that matches a glob pattern (the examples,
// from a test's directory), in path order; no match is a failure.
func Stacks(t testing.TB, pattern string) ([]string, []*lpg.Stack) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no stacks match %s: %v", pattern, err)
	}
	stacks := make([]*lpg.Stack, len(paths))
	for i, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, diags := lpg.LoadStack(p, src)
		if st == nil {
			t.Fatalf("%s: %v", p, diags)
		}
		stacks[i] = st
	}
	return paths, stacks
}

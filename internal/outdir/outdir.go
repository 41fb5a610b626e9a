// Package outdir writes a set of generated files into a directory without
// ever touching a file it did not write: each file is replaced atomically
// (a temporary file beside it, then a rename), a manifest in the directory
// lists what dragonc owns there, files of an earlier run that are no longer
// produced are removed only when that manifest lists them, a lock keeps two
// runs apart, and modes follow the umask. Replace is the atomic write of
// one file that dragonc's other writers (fmt -w, discover -o) use.
package outdir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Manifest is the file, in the output directory, that lists the files
// dragonc wrote there, one relative path a line.
const Manifest = ".dragonc-manifest"

// Lock is the file a run holds locked while it writes.
const Lock = ".dragonc.lock"

// ErrBusy is returned when another run holds the directory's lock.
var ErrBusy = errors.New("another dragonc is writing this directory")

// Writer writes one set of files. Cleanup may be called from a signal
// handler while Write runs: it removes the temporary files made so far.
type Writer struct {
	mu   sync.Mutex
	tmps []string
	done bool
}

// Write puts files (relative slash-separated paths to contents) into dir.
// A name ending in ".sh" is made executable.
func (w *Writer) Write(dir string, files map[string][]byte) (err error) {
	dir = filepath.Clean(dir)
	if err := checkTarget(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	old, err := readManifest(dir)
	if err != nil {
		return err
	}
	if old == nil {
		if err := checkForeign(dir, files); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if !safeName(name) {
			return fmt.Errorf("dragonc: internal error: output name %q leaves the directory", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	defer func() {
		if err != nil {
			w.Cleanup()
		}
	}()
	// Every file to a temporary name first, so that a failure leaves the
	// earlier outputs as they were.
	staged := make([]string, len(names))
	for i, name := range names {
		staged[i], err = w.stage(filepath.Join(dir, filepath.FromSlash(name)), files[name])
		if err != nil {
			return err
		}
	}
	for i, name := range names {
		if err := os.Rename(staged[i], filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.tmps = nil
	w.mu.Unlock()
	// Files the earlier run wrote and this one does not: only those.
	for _, name := range old {
		if _, still := files[name]; !still && safeName(name) {
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.Remove(p)
			removeEmptyParents(dir, filepath.Dir(p))
		}
	}
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name + "\n")
	}
	m, err := w.stage(filepath.Join(dir, Manifest), []byte(b.String()))
	if err != nil {
		return err
	}
	if err := os.Rename(m, filepath.Join(dir, Manifest)); err != nil {
		return err
	}
	w.mu.Lock()
	w.tmps, w.done = nil, true
	w.mu.Unlock()
	return nil
}

// Cleanup removes the temporary files of an unfinished Write.
func (w *Writer) Cleanup() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.tmps {
		os.Remove(t)
	}
	w.tmps = nil
}

// stage writes data to a temporary file beside path and returns its name.
func (w *Writer) stage(path string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return "", err
	}
	mode := os.FileMode(0o666)
	if strings.HasSuffix(path, ".sh") {
		mode = 0o777
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.tmp%d", filepath.Base(path), os.Getpid()))
	w.mu.Lock()
	w.tmps = append(w.tmps, tmp)
	w.mu.Unlock()
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return tmp, nil
}

// checkTarget refuses directories no output belongs in.
func checkTarget(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if abs == filepath.Dir(abs) {
		return fmt.Errorf("refusing to write outputs into %s, the root of the file system; name a directory of their own, such as out/", dir)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	return nil
}

// checkForeign refuses a directory with no manifest that holds something
// other than what an earlier dragonc (before manifests) wrote there.
func checkForeign(dir string, files map[string][]byte) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err == nil && strings.Contains(string(plan), `"generated_by": "dragonc"`) {
		return nil // an earlier dragonc's output
	}
	top := map[string]bool{}
	for name := range files {
		first, _, _ := strings.Cut(name, "/")
		top[first] = true
	}
	for _, e := range entries {
		if top[e.Name()] {
			return fmt.Errorf("%s already holds %s, which dragonc did not write (no %s there); give an empty or new directory, or one dragonc wrote", dir, e.Name(), Manifest)
		}
	}
	return nil // other files are left alone; ours do not collide with them
}

func readManifest(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, Manifest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, sc.Err()
}

// safeName reports whether a relative output name stays inside its
// directory.
func safeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "" || part == "." {
			return false
		}
	}
	return true
}

func removeEmptyParents(root, dir string) {
	for dir != root && strings.HasPrefix(dir, root) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// lockDir takes the directory's lock without waiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, Lock), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w; wait for it to finish", dir, ErrBusy)
		}
		return nil, err
	}
	return f, nil
}

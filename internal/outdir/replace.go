package outdir

import (
	"os"
	"path/filepath"
)

// Replace puts data at path atomically: it writes a temporary file beside
// path, lets prepare set the open temporary file's owner and mode (nil
// leaves the 0600 os.CreateTemp gives), and renames it over path, so a
// reader sees the old contents or the new, never part. On any failure,
// prepare's included, the temporary file is removed, path is left as it
// was, and the error is returned unwrapped (errors.Is sees prepare's).
func Replace(path string, data []byte, prepare func(*os.File) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close() // perhaps closed already
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(tmp); err != nil {
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

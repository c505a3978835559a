package pgtest

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/msgexchange/msgexchange/migrations"
)

// WriteSchema writes every migration to w, its path, its length and its content, so a hash of
// what it wrote names the schema: the test databases built from templates (pgtest, benchdata)
// name theirs by it, and a changed migration gets a new template instead of a test running
// against an old one.
func WriteSchema(w io.Writer) error {
	err := fs.WalkDir(migrations.PG, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.PG, path)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\x00%d\x00", path, len(b)); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("hash migrations: %w", err)
	}
	return nil
}

package schemacheck

import (
	"strings"
	"testing"
)

// TestMigrationsKeepThePreviousReleaseWorking runs the check on the repository's migrations.
// Guards R-INV-25.
func TestMigrationsKeepThePreviousReleaseWorking(t *testing.T) {
	t.Parallel()
	problems, err := CheckDir("../../migrations/sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckRefusesWhatBreaksThePreviousRelease plants each refused change, and the allowed
// forms beside it.
func TestCheckRefusesWhatBreaksThePreviousRelease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sql string
		refused   bool
	}{
		{"nullable column", "ALTER TABLE t ADD COLUMN c jsonb;", false},
		{"defaulted NOT NULL column", "ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 0;", false},
		{"NOT NULL column without a default", "ALTER TABLE t ADD COLUMN c int NOT NULL;", true},
		{"rename a column", "ALTER TABLE t RENAME COLUMN a TO b;", true},
		{"rename a table", "ALTER TABLE t RENAME TO u;", true},
		{"rename even when marked", "-- contract: unused\nALTER TABLE t RENAME TO u;", true},
		{"drop a column", "ALTER TABLE t DROP COLUMN c;", true},
		{"drop a column marked as a contraction", "-- contract: the release before stopped reading c\nALTER TABLE t DROP COLUMN c;", false},
		{"drop a table", "DROP TABLE t;", true},
		{"change a type", "ALTER TABLE t ALTER COLUMN c TYPE bigint;", true},
		{"set NOT NULL", "ALTER TABLE t ALTER COLUMN c SET NOT NULL;", true},
		{"a new table", "CREATE TABLE t (a int NOT NULL, b text);", false},
		{"the Down section is not checked", "ALTER TABLE t ADD COLUMN c jsonb;\n-- +goose Down\nALTER TABLE t DROP COLUMN c;", false},
		{"a function body", "-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM 1;\nEND\n$$;\n-- +goose StatementEnd", false},
	}
	for _, tc := range cases {
		got := Check("x.sql", "-- +goose Up\n"+tc.sql)
		if (len(got) > 0) != tc.refused {
			t.Errorf("%s: problems %v, want refused %v", tc.name, got, tc.refused)
		}
		for _, p := range got {
			if !strings.Contains(p.String(), "x.sql") {
				t.Errorf("%s: problem does not name the file: %s", tc.name, p)
			}
		}
	}
}

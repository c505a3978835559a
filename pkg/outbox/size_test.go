package outbox_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestSentBytesIsTheJSONBText: SentBytes is the length of the text PostgreSQL gives back for a
// payload stored as jsonb (what the dispatcher reads and sends), for random documents shaped
// like the flight documents (objects, arrays of objects, strings with every kind of character
// encoding/json and PostgreSQL escape differently, integers), and MaxSentBytes is never below
// it.
func TestSentBytesIsTheJSONBText(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	r := rand.New(rand.NewPCG(57, 1))
	chars := []string{"a", "Z", "0", " ", ":", ",", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\r", "\b", "\f", "\x01", "\x1f",
		"é", "航", "\u2028", "\u3000", "{", "]"}
	str := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(chars[r.IntN(len(chars))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(6); {
		case k == 0 && depth < 3:
			o := map[string]any{}
			for range r.IntN(5) {
				o[str()] = value(depth + 1)
			}
			return o
		case k == 1 && depth < 3:
			a := []any{}
			for range r.IntN(4) {
				a = append(a, value(depth+1))
			}
			return a
		case k == 2:
			return r.Int64N(1 << 40)
		default:
			return str()
		}
	}
	for i := range 300 {
		doc := map[string]any{}
		for range 1 + r.IntN(8) {
			doc[str()] = value(0)
		}
		payload, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var want int
		if err := d.Pool.QueryRow(t.Context(), `SELECT octet_length($1::jsonb::text)`, string(payload)).Scan(&want); err != nil {
			t.Fatalf("document %d %s: %v", i, payload, err)
		}
		got, err := outbox.SentBytes(payload)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("document %d %s: SentBytes %d, PostgreSQL's text is %d bytes", i, payload, got, want)
		}
		if bound := outbox.MaxSentBytes(payload); bound < want {
			t.Fatalf("document %d %s: MaxSentBytes %d below the %d of PostgreSQL's text", i, payload, bound, want)
		}
	}
}

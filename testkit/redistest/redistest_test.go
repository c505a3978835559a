package redistest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgexchange/msgexchange/testkit/internal/fataltest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

func TestNewGivesUniquePrefix(t *testing.T) {
	t.Parallel()
	a, b := redistest.New(t), redistest.New(t)
	if a.Prefix == b.Prefix {
		t.Fatalf("two calls share prefix %s", a.Prefix)
	}
	if !strings.HasPrefix(a.Prefix, "msgxt:redistest:") || !strings.HasSuffix(a.Prefix, ":") {
		t.Errorf("prefix %q: want msgxt:redistest:…:", a.Prefix)
	}
	ctx := t.Context()
	if err := a.Client.Set(ctx, a.Key("flight:1"), "A", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Client.Exists(ctx, b.Key("flight:1")).Result(); err != nil || n != 0 {
		t.Errorf("b sees a's key (exists=%d, err=%v)", n, err)
	}
}

func TestCleanupDeletesOnlyKeysUnderPrefix(t *testing.T) {
	t.Parallel()
	observer := redistest.New(t)
	ctx := t.Context()
	// A key outside every test prefix but owned by this test, to prove cleanup stays in bounds.
	outside := fmt.Sprintf("msgxt-outside:%d", time.Now().UnixNano())
	if err := observer.Client.Set(ctx, outside, "keep", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// t.Context is already cancelled when cleanups run.
	t.Cleanup(func() { observer.Client.Del(context.Background(), outside) })

	var prefix string
	t.Run("inner", func(t *testing.T) {
		r := redistest.New(t)
		prefix = r.Prefix
		pipe := r.Client.Pipeline()
		// More keys than one SCAN batch, of several types.
		for i := range 1200 {
			pipe.Set(t.Context(), r.Key(fmt.Sprintf("k:%d", i)), i, 0)
		}
		pipe.HSet(t.Context(), r.Key("flight:42"), "ESTT", "1825")
		pipe.ZAdd(t.Context(), r.Key("idx"), redis.Z{Score: 1, Member: "m"})
		pipe.RPush(t.Context(), r.Key("list"), "x")
		if _, err := pipe.Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
	})

	var left []string
	iter := observer.Client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		left = append(left, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d keys under %s survived the test, e.g. %s", len(left), prefix, left[0])
	}
	if v, err := observer.Client.Get(ctx, outside).Result(); err != nil || v != "keep" {
		t.Errorf("key outside the prefix was touched: %q, %v", v, err)
	}
}

func TestUnreachableServerFailsNamingEnv(t *testing.T) {
	t.Setenv(redistest.EnvURL, "redis://127.0.0.1:1/0?dial_timeout=2s")
	msg := fataltest.Message(t, func(tb testing.TB) { redistest.New(tb) })
	if !strings.Contains(msg, redistest.EnvURL) {
		t.Fatalf("failure message %q does not name %s", msg, redistest.EnvURL)
	}
}

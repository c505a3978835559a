package cursor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestParseSeed(t *testing.T) {
	tests := []struct {
		in      string
		want    cursor.Seed
		wantErr bool
	}{
		{in: "min", want: cursor.Seed{Mode: cursor.SeedMin}},
		{in: "zero", want: cursor.Seed{Mode: cursor.SeedZero}},
		{in: " max ", want: cursor.Seed{Mode: cursor.SeedMax}},
		{in: "0", want: cursor.Seed{Mode: cursor.SeedID, ID: 0}},
		{in: "123456", want: cursor.Seed{Mode: cursor.SeedID, ID: 123456}},
		{in: "-1", wantErr: true},
		{in: "MIN", wantErr: true},
		{in: "", wantErr: true},
		{in: "12a", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := cursor.ParseSeed(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("seed = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSeedWatermark(t *testing.T) {
	tests := []struct {
		name     string
		seed     cursor.Seed
		min, max int64
		want     int64
		wantErr  error
	}{
		{name: "min reads the oldest existing row first", seed: cursor.Seed{Mode: cursor.SeedMin}, min: 1000, max: 2000, want: 999},
		{name: "min on an inbox starting at 1", seed: cursor.Seed{Mode: cursor.SeedMin}, min: 1, max: 5, want: 0},
		{name: "max skips the visible stock", seed: cursor.Seed{Mode: cursor.SeedMax}, min: 1000, max: 2000, want: 2000},
		{name: "zero ignores the inbox", seed: cursor.Seed{Mode: cursor.SeedZero}, min: 1000, max: 2000, want: 0},
		{name: "zero on an empty inbox", seed: cursor.Seed{Mode: cursor.SeedZero}, want: 0},
		{name: "an explicit ID is W", seed: cursor.Seed{Mode: cursor.SeedID, ID: 1500}, min: 1000, max: 2000, want: 1500},
		{name: "an explicit ID on an empty inbox is refused", seed: cursor.Seed{Mode: cursor.SeedID, ID: 7}, wantErr: cursor.ErrBeyondInbox},
		{name: "min on an empty inbox waits", seed: cursor.Seed{Mode: cursor.SeedMin}, wantErr: cursor.ErrInboxEmpty},
		{name: "max on an empty inbox waits", seed: cursor.Seed{Mode: cursor.SeedMax}, wantErr: cursor.ErrInboxEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.seed.Watermark(tt.min, tt.max)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("W = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestApplySeedsEveryModeOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		seed  cursor.Seed
		wantW int64
	}{
		{cursor.Seed{Mode: cursor.SeedMin}, 99},
		{cursor.Seed{Mode: cursor.SeedZero}, 0},
		{cursor.Seed{Mode: cursor.SeedMax}, 250},
		{cursor.Seed{Mode: cursor.SeedID, ID: 180}, 180},
	} {
		t.Run(tt.seed.String(), func(t *testing.T) {
			t.Parallel()
			pg := pgtest.New(t)
			ctx := t.Context()
			hole := t0.Add(-time.Minute)
			// A hole clock observed by an unseeded start at W = 0 is replaced by the seed.
			if err := cursor.Save(ctx, pg.Pool, 0, &hole, t0); err != nil {
				t.Fatal(err)
			}
			w, err := cursor.Apply(ctx, pg.Pool, tt.seed, cursor.View{Min: 100, Max: 250}, t0)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if w != tt.wantW {
				t.Errorf("W = %d, want %d", w, tt.wantW)
			}
			c, err := cursor.Load(ctx, pg.Pool)
			if err != nil {
				t.Fatal(err)
			}
			if c.W != tt.wantW || c.HoleSince != nil || c.SeededAt == nil || !c.SeededAt.Equal(t0) ||
				c.SeedMode == nil || *c.SeedMode != string(tt.seed.Mode) || c.SeedValue == nil || *c.SeedValue != tt.wantW {
				t.Errorf("cursor after seeding = %+v", c)
			}
			// The same seed again (a restart with the same configuration) is refused.
			if _, err := cursor.Apply(ctx, pg.Pool, tt.seed, cursor.View{Min: 100, Max: 250}, t0.Add(time.Hour)); !errors.Is(err, cursor.ErrAlreadySeeded) {
				t.Errorf("second Apply: err = %v, want ErrAlreadySeeded", err)
			}
			if c2, _ := cursor.Load(ctx, pg.Pool); !c2.SeededAt.Equal(t0) || c2.W != tt.wantW {
				t.Errorf("a refused seed changed the cursor: %+v", c2)
			}
		})
	}
}

func TestApplyRefusals(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	seedMax := cursor.Seed{Mode: cursor.SeedMax}
	tests := []struct {
		name    string
		prepare func(t *testing.T, pg *pgtest.DB)
		want    error
	}{
		{name: "seeded_at set", want: cursor.ErrAlreadySeeded, prepare: func(t *testing.T, pg *pgtest.DB) {
			if _, err := cursor.Apply(t.Context(), pg.Pool, cursor.Seed{Mode: cursor.SeedZero}, cursor.View{}, t0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the cursor moved", want: cursor.ErrCursorMoved, prepare: func(t *testing.T, pg *pgtest.DB) {
			if err := cursor.Save(t.Context(), pg.Pool, 42, nil, t0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "proc_state has rows", want: cursor.ErrMessagesExist, prepare: func(t *testing.T, pg *pgtest.DB) {
			// Only reachable by a queue filled outside discovery (or a cursor reset by hand).
			if _, err := queue.Enqueue(t.Context(), pg.Pool, []queue.NewMessage{{MsgID: 7}}, t0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "min and max on an empty inbox", want: cursor.ErrInboxEmpty, prepare: func(*testing.T, *pgtest.DB) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pg := pgtest.New(t)
			tt.prepare(t, pg)
			before, err := cursor.Load(t.Context(), pg.Pool)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := int64(10), int64(20)
			if tt.want == cursor.ErrInboxEmpty {
				lo, hi = 0, 0
			}
			_, err = cursor.Apply(t.Context(), pg.Pool, seedMax, cursor.View{Min: lo, Max: hi}, t0.Add(time.Hour))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if refused := errors.Is(err, cursor.ErrSeedRefused); refused != (tt.want != cursor.ErrInboxEmpty) {
				t.Errorf("errors.Is(err, ErrSeedRefused) = %v", refused)
			}
			after, err := cursor.Load(t.Context(), pg.Pool)
			if err != nil {
				t.Fatal(err)
			}
			if after.W != before.W || (after.SeededAt == nil) != (before.SeededAt == nil) {
				t.Errorf("a refused seed changed the cursor: %+v → %+v", before, after)
			}
		})
	}
}

func TestSeedHoles(t *testing.T) {
	tests := []struct {
		name    string
		seed    cursor.Seed
		w, min  int64
		visible []int64
		want    [][2]int64
	}{
		{name: "zero watches nothing", seed: cursor.Seed{Mode: cursor.SeedZero}},
		{name: "min watches every ID below the oldest row", seed: cursor.Seed{Mode: cursor.SeedMin}, w: 999, min: 1000,
			want: [][2]int64{{1, 999}}},
		{name: "min on an inbox starting at 1", seed: cursor.Seed{Mode: cursor.SeedMin}, w: 0, min: 1},
		{name: "max watches the gaps below the largest row", seed: cursor.Seed{Mode: cursor.SeedMax}, w: 20, min: 10,
			visible: []int64{10, 11, 14, 20}, want: [][2]int64{{1, 9}, {12, 13}, {15, 19}}},
		{name: "an explicit ID watches the gaps and the top", seed: cursor.Seed{Mode: cursor.SeedID, ID: 20}, w: 20,
			visible: []int64{18}, want: [][2]int64{{1, 17}, {19, 20}}},
		{name: "only the window below W", seed: cursor.Seed{Mode: cursor.SeedMax}, w: cursor.SeedWindow + 100,
			visible: []int64{cursor.SeedWindow + 100}, want: [][2]int64{{101, cursor.SeedWindow + 99}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cursor.SeedHoles(tt.seed, tt.w, tt.min, tt.visible)
			if len(got) != len(tt.want) {
				t.Fatalf("holes = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("holes = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestExplicitWatermarkAboveTheInboxIsRefused(t *testing.T) {
	_, err := cursor.Seed{Mode: cursor.SeedID, ID: 5000}.Watermark(1, 4000)
	if !errors.Is(err, cursor.ErrBeyondInbox) || !errors.Is(err, cursor.ErrSeedRefused) {
		t.Fatalf("err = %v, want ErrBeyondInbox (a refusal)", err)
	}
}

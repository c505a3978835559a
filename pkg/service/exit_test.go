package service

import (
	"errors"
	"fmt"
	"testing"
)

// A dependency's refusal of the settings exits 3 however deeply it is wrapped; any other
// failure exits 1 (R-START-2).
func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{errors.New("service failed"), 1},
		{fmt.Errorf("%w: Redis refused the settings of MSGX_REDIS_URL", ErrSettingsRefused), ExitSettingsRefused},
		{fmt.Errorf("run: %w", fmt.Errorf("%w: kafka", ErrSettingsRefused)), ExitSettingsRefused},
	} {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

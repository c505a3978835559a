package server

import (
	"testing"

	_ "github.com/msgexchange/msgexchange/proto/msgx/control/v1" // registers the descriptors
)

func TestMutating(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]bool{
		"/msgx.control.v1.ControlService/GetStatus":                false,
		"/msgx.control.v1.ControlService/GetMessage":               false,
		"/msgx.control.v1.ControlService/ListMessages":             false,
		"/msgx.control.v1.ControlService/Replay":                   true,
		"/msgx.control.v1.ControlService/Reopen":                   true,
		"/msgx.control.v1.ControlService/SeedCutover":              true,
		"/msgx.control.v1.ControlService/ResolveContractViolation": true,
		"/msgx.control.v1.ControlService/GetReference":             false,
		"/msgx.control.v1.ControlService/ListReference":            false,
		"/msgx.control.v1.ControlService/GetResourceStatus":        false,
		"/msgx.control.v1.ControlService/GetFlight":                false,
		"/msgx.control.v1.ControlService/ListRequests":             false,
		"/msgx.control.v1.ControlService/RequestSchedule":          true,
		// Not in the role table: treated as mutating until declared a read.
		"/msgx.control.v1.ControlService/Unknown": true,
	} {
		if got := Mutating(method); got != want {
			t.Errorf("Mutating(%s) = %v, want %v", method, got, want)
		}
	}
}

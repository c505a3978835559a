package controlv1

// Who may call what on the control API. The server authorises by this table and msgxctl's help
// names each command's role from it, so the two cannot disagree.

// Role is what a caller of the control API may do.
type Role int

const (
	// RoleNone is a caller without a valid credential.
	RoleNone Role = iota
	// RoleReader may call the reads: status, messages, reference data, requests.
	RoleReader
	// RoleOperator may call everything, the mutating RPCs included.
	RoleOperator
)

func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleOperator:
		return "operator"
	default:
		return "none"
	}
}

// Allows reports whether a caller with role r may call a method that needs need.
func (r Role) Allows(need Role) bool { return r >= need }

// readMethods are the methods a reader may call: exactly the reads, which change nothing. A
// method that is not listed needs the operator, so a new RPC is closed to readers until it is
// added here (one line: its generated FullMethodName constant). The proto marks the same
// methods idempotency_level = NO_SIDE_EFFECTS; a test keeps the two in step.
var readMethods = map[string]bool{
	ControlService_GetStatus_FullMethodName:              true,
	ControlService_GetMessage_FullMethodName:             true,
	ControlService_GetMessageBody_FullMethodName:         true,
	ControlService_ListMessages_FullMethodName:           true,
	ControlService_GetReference_FullMethodName:           true,
	ControlService_ListReference_FullMethodName:          true,
	ControlService_GetResourceStatus_FullMethodName:      true,
	ControlService_ListRequests_FullMethodName:           true,
	ControlService_GetFlight_FullMethodName:              true,
	ControlService_GetFlightHistory_FullMethodName:       true,
	ControlService_GetProjectionRebuild_FullMethodName:   true,
	ControlService_ListProjectionRebuilds_FullMethodName: true,
	ControlService_GetRepublish_FullMethodName:           true,
	ControlService_ListRepublishes_FullMethodName:        true,
}

// RequiredRole is the role a call of fullMethod ("/msgx.control.v1.ControlService/GetStatus")
// needs: the reader for the listed reads, the operator for anything else.
func RequiredRole(fullMethod string) Role {
	if readMethods[fullMethod] {
		return RoleReader
	}
	return RoleOperator
}

// Mutating reports whether fullMethod changes the pipeline: every method that is not a listed
// read. Mutating calls are audited and fenced to the active instance.
func Mutating(fullMethod string) bool { return RequiredRole(fullMethod) == RoleOperator }

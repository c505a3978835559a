package controlv1_test

import (
	"testing"

	"google.golang.org/protobuf/types/descriptorpb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The role table and the proto's NO_SIDE_EFFECTS marks must name the same reads: a read
// missing from the table would be closed to readers, a mutating RPC in it would be open to
// them.
func TestRoleTableMatchesTheProto(t *testing.T) {
	svc := controlv1.File_msgx_control_v1_control_proto.Services().ByName("ControlService")
	methods := svc.Methods()
	for i := range methods.Len() {
		md := methods.Get(i)
		full := "/" + string(svc.FullName()) + "/" + string(md.Name())
		opts, _ := md.Options().(*descriptorpb.MethodOptions)
		read := opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
		want := controlv1.RoleOperator
		if read {
			want = controlv1.RoleReader
		}
		if got := controlv1.RequiredRole(full); got != want {
			t.Errorf("%s needs %s in the role table, want %s (proto NO_SIDE_EFFECTS=%v)", full, got, want, read)
		}
	}
}

func TestUnknownMethodsNeedTheOperator(t *testing.T) {
	for _, m := range []string{"/msgx.control.v1.ControlService/RebuildProjection", "", "/x.Y/GetStatus"} {
		if got := controlv1.RequiredRole(m); got != controlv1.RoleOperator {
			t.Errorf("RequiredRole(%q) = %s, want operator", m, got)
		}
	}
	if controlv1.RoleReader.Allows(controlv1.RoleOperator) || !controlv1.RoleOperator.Allows(controlv1.RoleReader) {
		t.Error("role order wrong")
	}
}

// docs/control.md promises a preview of every action: each mutating RPC's request has a
// dry_run field, and its response says it was one, except SeedCutover's one-time seeding.
func TestEveryMutatingCallHasADryRun(t *testing.T) {
	svc := controlv1.File_msgx_control_v1_control_proto.Services().ByName("ControlService")
	methods := svc.Methods()
	n := 0
	for i := range methods.Len() {
		md := methods.Get(i)
		if !controlv1.Mutating("/"+string(svc.FullName())+"/"+string(md.Name())) || md.Name() == "SeedCutover" {
			continue
		}
		n++
		if f := md.Input().Fields().ByName("dry_run"); f == nil || f.Kind().String() != "bool" {
			t.Errorf("%s: its request has no bool dry_run", md.Name())
		}
		// RebuildProjection's dry run is a job of its own (the check), which its rebuild names.
		if md.Name() != "RebuildProjection" && md.Output().Fields().ByName("dry_run") == nil {
			t.Errorf("%s: its response does not say it was a dry run", md.Name())
		}
	}
	if n < 11 {
		t.Errorf("only %d mutating RPCs checked", n)
	}
}

package controlv1_test

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// protoRoot is the buf module root (proto/) relative to this package's directory, where go
// test runs; import paths in the .proto files are relative to it.
const protoRoot = "../../.."

const protoFile = "msgx/control/v1/control.proto"

// compileSource compiles the .proto as it is on disk now, with protocompile (a pure-Go protobuf
// compiler, so the test needs neither protoc nor buf installed).
func compileSource(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protoRoot}}),
		// The generated code embeds the descriptor without source info; compile it the same way.
		SourceInfoMode: protocompile.SourceInfoNone,
	}
	files, err := c.Compile(context.Background(), protoFile)
	if err != nil {
		t.Fatalf("compile %s: %v", protoFile, err)
	}
	return files.FindFileByPath(protoFile)
}

// TestGeneratedCodeIsCurrent fails when control.proto changed after control.pb.go was
// generated: the descriptor compiled from the source must equal the one embedded in the code.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	fromSource := protodesc.ToFileDescriptorProto(compileSource(t))
	embedded := protodesc.ToFileDescriptorProto(controlv1.File_msgx_control_v1_control_proto)
	if diff := cmp.Diff(embedded, fromSource, protocmp.Transform()); diff != "" {
		t.Fatalf("generated Go code is stale for %s: run proto/generate.sh and commit the result (-generated +source):\n%s",
			protoFile, diff)
	}
}

// TestGRPCCodeIsCurrent fails when control_grpc.pb.go was not regenerated with control.pb.go
// (the descriptor test above only sees the latter): its service description must list exactly
// the methods of the .proto, streaming ones included.
func TestGRPCCodeIsCurrent(t *testing.T) {
	fd := compileSource(t)
	svc := fd.Services().ByName("ControlService")
	if svc == nil {
		t.Fatalf("%s has no ControlService", protoFile)
	}
	desc := controlv1.ControlService_ServiceDesc
	if want := string(svc.FullName()); desc.ServiceName != want {
		t.Fatalf("control_grpc.pb.go serves %q, the .proto declares %q: run proto/generate.sh", desc.ServiceName, want)
	}
	generated := map[string]bool{}
	for _, m := range desc.Methods {
		generated[m.MethodName] = true
	}
	for _, s := range desc.Streams {
		generated[s.StreamName] = true
	}
	methods := svc.Methods()
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		if !generated[name] {
			t.Errorf("control_grpc.pb.go lacks RPC %s: run proto/generate.sh", name)
		}
		delete(generated, name)
	}
	for name := range generated {
		t.Errorf("control_grpc.pb.go has RPC %s that the .proto no longer declares: run proto/generate.sh", name)
	}
}

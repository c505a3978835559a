// Package buildinfo says which build a binary is: its version and commit, printed by
// --version and exported as the metric msgx_build_info.
//
// The Makefile and the Dockerfile stamp both with -ldflags -X (the Docker build context has no
// .git, and the workspace builds with -buildvcs=false); a binary built without them falls back
// to what the Go toolchain recorded (the module version, the vcs.revision when VCS stamping was
// on), else "devel" and "unknown".
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by -ldflags "-X github.com/msgexchange/msgexchange/pkg/buildinfo.version=... -X ...commit=...".
var (
	version string
	commit  string
)

// Info is one binary's build.
type Info struct {
	Version, Commit, GoVersion string
}

// Get returns the build of the running binary.
func Get() Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is the --version line.
func (i Info) String() string {
	return fmt.Sprintf("version %s, commit %s, %s", i.Version, i.Commit, i.GoVersion)
}

// PrintVersion writes "<name> <build>" to w and reports true when args ask for the version
// (--version or -version as the only argument); the caller then exits 0.
func PrintVersion(name string, args []string, w io.Writer) bool {
	if len(args) != 1 || (args[0] != "--version" && args[0] != "-version") {
		return false
	}
	fmt.Fprintf(w, "%s %s\n", name, Get())
	return true
}

// Collector is the gauge msgx_build_info{version,commit,goversion} = 1, so that dashboards and
// alerts can tell which build each instance runs.
func Collector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_build_info",
		Help: "The build of this binary: always 1, labelled with its version and commit."},
		[]string{"version", "commit", "goversion"})
	g.WithLabelValues(i.Version, i.Commit, i.GoVersion).Set(1)
	return g
}

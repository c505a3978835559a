// Command msgx-benchreport prints the report of one `make bench` run from the figures the
// benches appended to the file given as its argument (testkit/benchreport, docs/performance.md).
package main

import (
	"fmt"
	"os"

	"github.com/msgexchange/msgexchange/testkit/benchreport"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: msgx-benchreport FIGURES-FILE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = f.Close() }()
	figs, err := benchreport.Read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	benchreport.Write(os.Stdout, figs)
}

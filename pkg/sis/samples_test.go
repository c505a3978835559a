package sis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// samplesEnv names a folder of sample messages from upstream (*.xml) to decode on top of the
// corpus in testdata. The samples are not part of the repository and no path to them is built
// in (D-17): set the variable where a copy exists.
const samplesEnv = "MSGX_SIS_SAMPLES"

// TestSharedSamples decodes every sample of $MSGX_SIS_SAMPLES: each must decode, none may be
// MALFORMED (or a CODEC_ERROR), and the kind must follow TYPE/STYP.
func TestSharedSamples(t *testing.T) {
	samplesDir := os.Getenv(samplesEnv)
	if samplesDir == "" {
		t.Skipf("%s is not set: no upstream samples to check", samplesEnv)
	}
	if _, err := os.Stat(samplesDir); err != nil {
		t.Fatalf("%s: %v", samplesEnv, err)
	}
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no *.xml in %s", samplesDir)
	}
	kinds := map[string]int{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text, err := BytesToText(raw, "")
			if err != nil {
				t.Fatalf("BytesToText: %v", err)
			}
			m, err := Decode(text, Options{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			kinds[kindName(m.Body)]++
			// The file names are TYPE-STYP-...: the decoded META must agree.
			parts := strings.SplitN(filepath.Base(f), "-", 3)
			if m.Meta.TYPE != parts[0] || m.Meta.STYP != parts[1] {
				t.Errorf("META %s/%s, file name says %s/%s", m.Meta.TYPE, m.Meta.STYP, parts[0], parts[1])
			}
			want := expectedKind(m.Meta)
			if got := kindName(m.Body); got != want {
				t.Errorf("kind %s, want %s (%+v)", got, want, m.Body)
			}
		})
	}
	t.Logf("decoded %d samples: %v", len(files), kinds)
}

// expectedKind restates the dispatch rule (R-FLOP-1, R-REF-1) independently of body().
func expectedKind(m Meta) string {
	in := func(list, s string) bool {
		for _, v := range strings.Fields(list) {
			if v == s {
				return true
			}
		}
		return false
	}
	switch {
	case m.TYPE == "FLOP" && in("ACFT ACTT BOTM CHOT FLTY CKDT CLDT CHDT CNCL ESTT FDEL FDIV FINT FLIN FRET GTDT LACL MAXP HNAG PSDT RENO ROUT TAOP TRML VIPP ABTM DELY PADT FTSS STND BDPB REMC", m.STYP):
		return "Flop"
	case m.TYPE == "SCHD" && in("DNLD RESP ADFT", m.STYP):
		return "Schd"
	case in("COUL ARPT AIRL AIRC REGN ORGN FLTL TLST GLST SLST CLST BLST CHLT", m.TYPE) && in("DNLD RESP ADD UPD DEL", m.STYP):
		return "RefData"
	}
	return "Unsupported"
}

func kindName(b Body) string {
	switch b.(type) {
	case *Flop:
		return "Flop"
	case *Schd:
		return "Schd"
	case *RefData:
		return "RefData"
	case *ResourceStatus:
		return "ResourceStatus"
	case *RQFD:
		return "RQFD"
	case *RQRD:
		return "RQRD"
	case *Eror:
		return "Eror"
	case *Unsupported:
		return "Unsupported"
	}
	return "nil"
}

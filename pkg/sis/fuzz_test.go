package sis

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// addCorpusSeeds seeds a fuzz target with every corpus file.
func addCorpusSeeds(f *testing.F, add func([]byte)) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.xml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		add(raw)
	}
}

// FuzzDecode: no input panics; every failure is a classed *DecodeError with a path and a reason;
// every success has a complete META and a body; decoding is deterministic.
func FuzzDecode(f *testing.F) {
	addCorpusSeeds(f, func(b []byte) { f.Add(string(b)) })
	f.Add(genSchedule(3))
	f.Add(`<MSG><META/></MSG>`)
	f.Add(`<a:MSG xmlns:a="x"><META></META></a:MSG>`)
	f.Fuzz(func(t *testing.T, text string) {
		opts := Options{MaxBytes: 1 << 20, MaxDepth: 32, MaxElements: 20000, MaxText: 64}
		m, err := Decode(text, opts)
		m2, err2 := Decode(text, opts)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Class != Malformed && de.Class != CodecError {
				t.Fatalf("class %q", de.Class)
			}
			if !strings.HasPrefix(de.Path, "/") || de.Reason == "" {
				t.Fatalf("error without path or reason: %+v", de)
			}
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("not deterministic: %v then %v", err, err2)
			}
			return
		}
		if m == nil || m.Body == nil {
			t.Fatalf("success without a message or body: %+v", m)
		}
		if m.Meta.SNDR == "" || m.Meta.TYPE == "" || m.Meta.STYP == "" || m.Meta.SEQNText == "" || m.Meta.DTTM.IsZero() || m.Meta.SEQN < 0 {
			t.Fatalf("incomplete META %+v", m.Meta)
		}
		switch b := m.Body.(type) {
		case *Flop:
			if b.Record.FLID == "" {
				t.Fatal("FLOP without FLID decoded")
			}
			checkBounded(t, b.Record, opts.MaxText)
		case *Schd:
			for _, r := range b.Records {
				if r.FLID == "" {
					t.Fatal("FLTR without FLID decoded")
				}
				checkBounded(t, r, opts.MaxText)
			}
		case *RefData:
			for _, r := range b.Records {
				if r.Key == "" {
					t.Fatal("reference record without key decoded")
				}
			}
		}
		if err2 != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("not deterministic: %+v / %v", m2, err2)
		}
	})
}

// checkBounded fails when a decoded flight record holds a value longer than maxText or a
// collection over its SIS limit: whatever decodes must be within the bounds.
func checkBounded(t *testing.T, r FlightRecord, maxText int) {
	t.Helper()
	long := func(where string, f Field) {
		if len(f.Value) > maxText {
			t.Fatalf("%s is %d bytes, over MaxText %d", where, len(f.Value), maxText)
		}
	}
	long("FLID", Field{Value: r.FLID})
	long("FFID", r.FFID)
	for tag, f := range r.Scalars {
		long(tag, f)
	}
	for tag, c := range r.Collections {
		if limit := CollectionLimit(tag); len(c.Items) > limit {
			t.Fatalf("%s has %d items, over its limit %d", tag, len(c.Items), limit)
		}
		for _, it := range c.Items {
			long(tag+" sequence", Field{Value: it.Seq})
			for k, f := range it.Fields {
				long(tag+"/"+k, f)
			}
		}
	}
}

// FuzzBytesToText: no input panics, and whatever is accepted is valid UTF-8.
func FuzzBytesToText(f *testing.F) {
	addCorpusSeeds(f, func(b []byte) { f.Add(b, ""); f.Add(b, "gbk") })
	f.Fuzz(func(t *testing.T, raw []byte, charset string) {
		text, err := BytesToText(raw, charset)
		if err != nil {
			if _, ok := ClassOf(err); !ok && !errors.Is(err, ErrUnsupportedCharset) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !utf8.ValidString(text) {
			t.Fatalf("accepted text is not UTF-8: %q", text)
		}
	})
}

// representable reports whether s survives encode → decode unchanged: XML characters only and no
// XML white space at the ends (Decode trims it).
func representable(s string) bool {
	if !utf8.ValidString(s) || s != trim(s) {
		return false
	}
	for _, r := range s {
		if !(r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
	}
	return true
}

// fuzzTime maps any int64 onto a whole second whose airport-local year has four digits.
func fuzzTime(unix int64) time.Time {
	lo := time.Date(1000, 1, 2, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(9998, 12, 30, 0, 0, 0, 0, time.UTC).Unix()
	span := hi - lo
	off := unix % span
	if off < 0 {
		off += span
	}
	return time.Unix(lo+off, 0)
}

func checkEnvelope(t *testing.T, m Meta, sender string, seqn int, dttm time.Time, typ, styp string) {
	t.Helper()
	if m.SNDR != sender || m.TYPE != typ || m.STYP != styp || m.SEQNText != FormatSEQN(seqn) || FormatSEQN(int(m.SEQN)) != FormatSEQN(seqn) || !m.DTTM.Equal(dttm) {
		t.Fatalf("META %+v does not round-trip sender %q seqn %d dttm %v", m, sender, seqn, dttm)
	}
}

// FuzzEncodeRQFD: an encoded flight-data request decodes back to what was encoded.
func FuzzEncodeRQFD(f *testing.F) {
	f.Add("MSGX", 1, int64(1710460800), "15MAR240000", "16MAR240000")
	f.Add("发送方 & <co>", 999999, int64(-1), "", "01JAN70")
	f.Add("A", -7, int64(0), "x", "\t")
	f.Fuzz(func(t *testing.T, sender string, seqn int, unix int64, stdb, stde string) {
		dttm := fuzzTime(unix)
		e := Encoder{Sender: sender}
		senderOK := sender != "" && representable(sender)

		// Arbitrary range values: never a panic; when everything is representable and the values
		// are SIS times (or empty), it must round-trip exactly.
		m, err := Decode(e.EncodeRQFD(seqn, dttm, stdb, stde), Options{})
		timeOK := func(s string) bool { _, err := ParseTime(s, nil); return s == "" || err == nil }
		if senderOK && representable(stdb) && representable(stde) && timeOK(stdb) && timeOK(stde) {
			if err != nil {
				t.Fatalf("decode of own RQFD: %v", err)
			}
			checkEnvelope(t, m.Meta, sender, seqn, dttm, "RQFD", "NONE")
			if want := (&RQFD{STDB: present(stdb), STDE: present(stde)}); !reflect.DeepEqual(m.Body, want) {
				t.Fatalf("body %+v, want %+v", m.Body, want)
			}
		} else if err != nil {
			if _, ok := ClassOf(err); !ok {
				t.Fatalf("unclassed error %v", err)
			}
		}

		// Times derived from the input always form a valid request.
		lo := strings.ToUpper(dttm.Format("02Jan061504"))
		hi := strings.ToUpper(dttm.Add(24 * time.Hour).Format("02Jan06"))
		m, err = Decode(e.EncodeRQFD(seqn, dttm, lo, hi), Options{})
		if !senderOK {
			return
		}
		if err != nil {
			t.Fatalf("decode of own RQFD %s..%s: %v", lo, hi, err)
		}
		checkEnvelope(t, m.Meta, sender, seqn, dttm, "RQFD", "NONE")
		if want := (&RQFD{STDB: present(lo), STDE: present(hi)}); !reflect.DeepEqual(m.Body, want) {
			t.Fatalf("body %+v, want %+v", m.Body, want)
		}
	})
}

// FuzzEncodeRQRD: an encoded reference-data request decodes back to what was encoded.
func FuzzEncodeRQRD(f *testing.F) {
	f.Add("MSGX", 12, int64(1710460800), "GLST")
	f.Add("MSGX", 0, int64(0), "")
	f.Add("&", 1_000_000, int64(99), " RSTA")
	f.Fuzz(func(t *testing.T, sender string, seqn int, unix int64, category string) {
		dttm := fuzzTime(unix)
		m, err := Decode(Encoder{Sender: sender, Zone: time.UTC}.EncodeRQRD(seqn, dttm, category), Options{Zone: time.UTC})
		if sender == "" || category == "" || !representable(sender) || !representable(category) {
			if err != nil {
				if _, ok := ClassOf(err); !ok {
					t.Fatalf("unclassed error %v", err)
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("decode of own RQRD: %v", err)
		}
		checkEnvelope(t, m.Meta, sender, seqn, dttm, "RQRD", category)
		if !reflect.DeepEqual(m.Body, &RQRD{RTYP: category}) {
			t.Fatalf("body %+v, want RTYP %q", m.Body, category)
		}
	})
}

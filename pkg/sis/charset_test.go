package sis

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
)

const (
	wantORGN = "中国东方航空股份有限公司"
	wantOCAT = "旅客行李装载延误，预计推迟起飞"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestChineseRoundTrip converts each encoding family's bytes to text and decodes it: the Chinese
// must come out identical, never as mojibake.
func TestChineseRoundTrip(t *testing.T) {
	tests := []struct {
		file, contentType string
	}{
		{"encoding/utf8_chinese.xml", ""},
		{"encoding/utf8_chinese.xml", "utf-8"},
		{"encoding/gbk_chinese.xml", ""},                       // from the declaration
		{"encoding/gbk_chinese.xml", "\"GB2312\""},             // Content-Type wins, family read as GB18030
		{"encoding/gb2312_no_declared_encoding.xml", "gb2312"}, // only the Content-Type tells
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.contentType, func(t *testing.T) {
			text, err := BytesToText(readTestdata(t, tc.file), tc.contentType)
			if err != nil {
				t.Fatal(err)
			}
			// The stored text is decoded again later; the GBK declaration it still carries must
			// not be applied a second time.
			m, err := Decode(text, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := m.Body.(*RefData).Records[0]
			if got := field(rec, "ONMC").Value; got != wantORGN {
				t.Errorf("ONMC %q, want %q", got, wantORGN)
			}
			if got := field(rec, "OCAT").Value; got != wantOCAT {
				t.Errorf("OCAT %q, want %q", got, wantOCAT)
			}
		})
	}
}

func TestGB18030FourByte(t *testing.T) {
	text, err := BytesToText(readTestdata(t, "encoding/gb18030_four_byte.xml"), "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Body.(*Flop).Record.Scalars["REMC"].Value; got != "𠀀䶮€"+wantOCAT {
		t.Errorf("REMC %q", got)
	}
}

// TestGBKTextIsNotDecodedTwice feeds Decode text whose declaration says GBK: reading the UTF-8
// bytes of that text as GBK would produce mojibake.
func TestGBKTextIsNotDecodedTwice(t *testing.T) {
	gbk := readTestdata(t, "encoding/gbk_chinese.xml")
	text, err := BytesToText(gbk, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `encoding="GBK"`) || !strings.Contains(text, wantORGN) {
		t.Fatalf("stored text should keep the declaration and hold characters: %q", text[:120])
	}
	m, err := Decode(text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := field(m.Body.(*RefData).Records[0], "ONMC").Value; got != wantORGN {
		t.Errorf("ONMC %q", got)
	}
	// Control: the same bytes read as UTF-8 are not text at all.
	if _, err := BytesToText(gbk, "utf-8"); !isClass(err, Malformed) {
		t.Errorf("GBK bytes labelled UTF-8: %v, want MALFORMED", err)
	}
}

func TestBytesToTextErrors(t *testing.T) {
	tests := []struct {
		name        string
		raw         []byte
		contentType string
		unsupported bool // else MALFORMED
	}{
		{"invalid GBK bytes", readTestdata(t, "encoding/gbk_invalid_bytes.xml"), "", false},
		{"invalid UTF-8 bytes", readTestdata(t, "encoding/utf8_invalid_bytes.xml"), "", false},
		{"truncated GBK character", append([]byte(`<?xml version="1.0" encoding="gbk"?><MSG>`), 0xD6), "", false},
		{"Latin-1 declared", readTestdata(t, "encoding/latin1_unsupported.xml"), "", true},
		{"Shift_JIS content type", []byte("<MSG/>"), "Shift_JIS", true},
		{"UTF-16 byte-order mark", []byte{0xFF, 0xFE, '<', 0}, "", true},
		{"non-ASCII labelled US-ASCII", []byte("<MSG>é</MSG>"), "us-ascii", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, err := BytesToText(tc.raw, tc.contentType)
			if err == nil {
				t.Fatalf("converted to %q, want an error", text)
			}
			if tc.unsupported {
				if !errors.Is(err, ErrUnsupportedCharset) {
					t.Errorf("%v does not wrap ErrUnsupportedCharset", err)
				}
				if _, ok := ClassOf(err); ok {
					t.Errorf("an unsupported charset is not a decode class: %v", err)
				}
			} else if !isClass(err, Malformed) {
				t.Errorf("%v, want MALFORMED", err)
			}
		})
	}
}

func TestBytesToTextAccepts(t *testing.T) {
	// A U+FFFD that was really sent (four bytes in GB18030) is content, not an invalid byte.
	replacement, err := simplifiedchinese.GB18030.NewEncoder().String("<MSG>\uFFFD中</MSG>")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, raw, contentType, want string
	}{
		{"no declaration is UTF-8", "<MSG>中</MSG>", "", "<MSG>中</MSG>"},
		{"UTF-8 BOM wins and is dropped", "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"GBK\"?><MSG>中</MSG>", "gbk", `<?xml version="1.0" encoding="GBK"?><MSG>中</MSG>`},
		{"single-quoted declaration", "<?xml version='1.0' encoding = 'GB18030' ?><MSG>\xD6\xD0</MSG>", "", "<?xml version='1.0' encoding = 'GB18030' ?><MSG>中</MSG>"},
		{"US-ASCII", "<MSG>A</MSG>", "US-ASCII", "<MSG>A</MSG>"},
		{"sent U+FFFD", replacement, "gb18030", "<MSG>\uFFFD中</MSG>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BytesToText([]byte(tc.raw), tc.contentType)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func isClass(err error, c ErrorClass) bool {
	got, ok := ClassOf(err)
	return ok && got == c
}

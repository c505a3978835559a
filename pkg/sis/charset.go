package sis

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// BytesToText converts a raw body (the compat HTTP request) to the text to store in the inbox,
// where it is characters from then on. The charset is, in order: a UTF-8 byte-order mark (it
// cannot be anything else), contentTypeCharset when non-empty, the XML declaration's encoding,
// else UTF-8 (the XML default). UTF-8/US-ASCII and the GB2312/GBK/GB18030 family are supported;
// the family is decoded as GB18030, which contains the other two, so a mislabelled GBK body
// still reads correctly.
//
// An unsupported charset gives an error wrapping ErrUnsupportedCharset; bytes that are not valid
// in the charset give a MALFORMED *DecodeError (storing U+FFFD in their place would turn the
// message into mojibake that no replay could repair). A leading byte-order mark is dropped; the
// XML declaration is kept as sent, since Decode never applies it to text.
func BytesToText(raw []byte, contentTypeCharset string) (string, error) {
	if bytes.HasPrefix(raw, []byte{0xEF, 0xBB, 0xBF}) {
		return utf8Text(raw[3:], "UTF-8")
	}
	if bytes.HasPrefix(raw, []byte{0xFE, 0xFF}) || bytes.HasPrefix(raw, []byte{0xFF, 0xFE}) {
		return "", fmt.Errorf("sis: UTF-16 byte-order mark: %w", ErrUnsupportedCharset)
	}
	label := normalizeCharset(contentTypeCharset)
	if label == "" {
		label = normalizeCharset(declaredEncoding(raw))
	}
	switch label {
	case "", "utf-8", "utf8":
		return utf8Text(raw, "UTF-8")
	case "us-ascii", "ascii":
		if i := bytes.IndexFunc(raw, func(r rune) bool { return r >= utf8.RuneSelf }); i >= 0 {
			return "", malformed("/", fmt.Sprintf("byte 0x%02X at offset %d is not US-ASCII", raw[i], i), nil)
		}
		return string(raw), nil
	case "gb2312", "gbk", "gb18030", "cp936", "ms936", "windows-936", "x-gbk", "euc-cn", "csgb2312":
		return gbText(raw, label)
	}
	return "", fmt.Errorf("sis: charset %q: %w", label, ErrUnsupportedCharset)
}

func utf8Text(raw []byte, label string) (string, error) {
	if !utf8.Valid(raw) {
		off := 0
		for off < len(raw) {
			r, n := utf8.DecodeRune(raw[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return "", malformed("/", fmt.Sprintf("invalid %s at byte offset %d", label, off), nil)
	}
	return string(raw), nil
}

func gbText(raw []byte, label string) (string, error) {
	out, err := simplifiedchinese.GB18030.NewDecoder().Bytes(raw)
	if err != nil {
		return "", malformed("/", fmt.Sprintf("bytes are not valid %s", label), err)
	}
	// The x/text decoder substitutes U+FFFD for invalid bytes instead of failing. A U+FFFD in the
	// output is legitimate only if re-encoding reproduces the input exactly.
	if bytes.ContainsRune(out, utf8.RuneError) {
		back, encErr := simplifiedchinese.GB18030.NewEncoder().Bytes(out)
		if encErr != nil || !bytes.Equal(back, raw) {
			return "", malformed("/", fmt.Sprintf("bytes are not valid %s", label), encErr)
		}
	}
	return string(out), nil
}

func normalizeCharset(s string) string {
	return strings.ToLower(strings.Trim(s, " \t\"'"))
}

// declaredEncoding returns the encoding pseudo-attribute of a leading XML declaration, read as
// ASCII (the declaration is ASCII in every supported charset), or "".
func declaredEncoding(raw []byte) string {
	if !bytes.HasPrefix(raw, []byte("<?xml")) {
		return ""
	}
	head := raw
	if len(head) > 1024 {
		head = head[:1024]
	}
	end := bytes.Index(head, []byte("?>"))
	if end < 0 {
		return ""
	}
	decl := head[len("<?xml"):end]
	i := bytes.Index(decl, []byte("encoding"))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(decl[i+len("encoding"):], " \t\r\n")
	if len(rest) == 0 || rest[0] != '=' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || (rest[0] != '"' && rest[0] != '\'') {
		return ""
	}
	q := rest[0]
	j := bytes.IndexByte(rest[1:], q)
	if j < 0 {
		return ""
	}
	return string(rest[1 : 1+j])
}

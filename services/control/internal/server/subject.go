package server

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A certificate subject rule matches the parsed RDN sequence of a verified client certificate
// exactly: the same RDNs in the same order, each with the same attributes and values. Go's
// Subject.String() keeps only the last CN and orders the attributes itself, so
// "CN=ops,CN=mallory,O=Airport" would print as "CN=ops,O=Airport"; the rule of one CN never
// matches a certificate of two. A rule "URI:<uri>" matches a URI SAN exactly (a SPIFFE ID).

// attrTypes are the attribute names of RFC 4514 (and the ones Go prints) and their OIDs.
var attrTypes = map[string]string{
	"CN": "2.5.4.3", "SERIALNUMBER": "2.5.4.5", "C": "2.5.4.6", "L": "2.5.4.7", "ST": "2.5.4.8",
	"STREET": "2.5.4.9", "O": "2.5.4.10", "OU": "2.5.4.11", "POSTALCODE": "2.5.4.17",
	"DC": "0.9.2342.19200300.100.1.25", "UID": "0.9.2342.19200300.100.1.1",
}

const uriPrefix = "URI:"

// subjectKey parses a configured subject rule into the key a certificate must produce: an RFC
// 4514 string ("CN=ops,O=Airport", most specific RDN first, '+' joining the attributes of a
// multi-valued RDN, special characters escaped with '\') or "URI:" and a URI SAN.
func subjectKey(rule string) (string, error) {
	rule = strings.TrimSpace(rule)
	if uri, ok := strings.CutPrefix(rule, uriPrefix); ok {
		if uri = strings.TrimSpace(uri); uri == "" {
			return "", errors.New("URI: without a URI")
		}
		return uriPrefix + uri, nil
	}
	var rdns [][]string
	var attrs []string
	var b strings.Builder
	typ, inValue := "", false
	flushAttr := func() error {
		if !inValue {
			return errors.New("an attribute without '='")
		}
		oid, err := attrOID(typ)
		if err != nil {
			return err
		}
		v := strings.TrimSpace(b.String())
		if v == "" {
			return fmt.Errorf("%s has no value", typ)
		}
		attrs = append(attrs, attrKey(oid, v))
		b.Reset()
		typ, inValue = "", false
		return nil
	}
	for i := 0; i < len(rule); i++ {
		c := rule[i]
		switch {
		case c == '\\':
			if i+1 >= len(rule) {
				return "", errors.New("a trailing '\\'")
			}
			if i+2 < len(rule) && isHex(rule[i+1]) && isHex(rule[i+2]) {
				n, _ := strconv.ParseUint(rule[i+1:i+3], 16, 8)
				b.WriteByte(byte(n))
				i += 2
			} else {
				b.WriteByte(rule[i+1])
				i++
			}
		case c == '=' && !inValue:
			typ, inValue = strings.TrimSpace(b.String()), true
			b.Reset()
			if i+1 < len(rule) && rule[i+1] == '#' {
				return "", fmt.Errorf("%s: a #hex value is not supported", typ)
			}
		case c == '+' || c == ',':
			if err := flushAttr(); err != nil {
				return "", err
			}
			if c == ',' {
				rdns = append(rdns, attrs)
				attrs = nil
			}
		default:
			b.WriteByte(c)
		}
	}
	if err := flushAttr(); err != nil {
		return "", err
	}
	rdns = append(rdns, attrs)
	return rdnKey(rdns), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func attrOID(typ string) (string, error) {
	if oid, ok := attrTypes[strings.ToUpper(typ)]; ok {
		return oid, nil
	}
	parts := strings.Split(typ, ".")
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil || len(parts) < 2 {
			return "", fmt.Errorf("unknown attribute type %q (want CN, O, OU, C, L, ST, STREET, DC, UID, SERIALNUMBER, POSTALCODE or a dotted OID)", typ)
		}
	}
	return typ, nil
}

func attrKey(oid, value string) string { return oid + "=" + strconv.Quote(value) }

// rdnKey joins RDNs, most specific first; the attributes of one RDN form a set, so they are
// sorted.
func rdnKey(rdns [][]string) string {
	parts := make([]string, len(rdns))
	for i, attrs := range rdns {
		s := append([]string(nil), attrs...)
		sort.Strings(s)
		parts[i] = strings.Join(s, "+")
	}
	return strings.Join(parts, ",")
}

// certKeys are the keys a verified certificate matches: its subject's RDN sequence and each
// of its URI SANs. A subject that does not parse or holds a value that is not a string matches
// no rule.
func certKeys(cert *x509.Certificate) []string {
	var keys []string
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err == nil && len(rest) == 0 {
		rdns := make([][]string, 0, len(seq))
		ok := true
		// DER lists the most general RDN first; the rules are written most specific first.
		for i := len(seq) - 1; i >= 0; i-- {
			var attrs []string
			for _, a := range seq[i] {
				v, isString := a.Value.(string)
				if !isString {
					ok = false
				}
				attrs = append(attrs, attrKey(a.Type.String(), v))
			}
			rdns = append(rdns, attrs)
		}
		if ok && len(rdns) > 0 {
			keys = append(keys, rdnKey(rdns))
		}
	}
	for _, u := range cert.URIs {
		keys = append(keys, uriPrefix+u.String())
	}
	return keys
}

// subjectString is the certificate's whole subject for logs: every RDN in order (Go's
// Subject.String() would drop all but the last CN).
func subjectString(cert *x509.Certificate) string {
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return cert.Subject.String()
	}
	s := seq.String()
	for _, u := range cert.URIs {
		s += " " + uriPrefix + u.String()
	}
	return s
}

package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SentBytes is the size of the value the dispatcher sends for payload: msg_event.payload is
// jsonb, and the dispatcher reads it back as text (payload::text), which PostgreSQL writes with
// a space after every ':' and ',' and with its own string escapes. A flight document is
// therefore larger on Kafka than encoding/json made it (issue #57: a 268 KB Redis document
// was a 309 KB KAFKA:schd record). Numbers are counted as written, which is exact for the
// integers of the flight documents.
func SentBytes(payload []byte) (int, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	type container struct{ object, wantKey, first bool }
	var stack []container
	n := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("payload as jsonb text: %w", err)
		}
		if delim, ok := tok.(json.Delim); ok && (delim == '}' || delim == ']') {
			n++
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			c := &stack[len(stack)-1]
			switch {
			case c.object && c.wantKey:
				if !c.first {
					n += 2 // ", " before a member
				}
				c.first, c.wantKey = false, false
				n += quotedLen(tok.(string))
				continue
			case c.object:
				n += 2 // ": " between a key and its value
				c.wantKey = true
			default:
				if !c.first {
					n += 2 // ", " before an element
				}
				c.first = false
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			n++
			stack = append(stack, container{object: v == '{', wantKey: v == '{', first: true})
		case string:
			n += quotedLen(v)
		case json.Number:
			n += len(v)
		case bool:
			n += len(fmt.Sprint(v))
		case nil:
			n += len("null")
		}
	}
}

// quotedLen is the length of s as PostgreSQL's escape_json writes it: quotes, the two-character
// escapes of \b \f \n \r \t " and \, \u00XX for the other control characters, every other byte
// as it is.
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t' || c == '"' || c == '\\':
			n += 2
		case c < ' ':
			n += 6
		default:
			n++
		}
	}
	return n
}

// MaxSentBytes bounds SentBytes from above without parsing a payload encoding/json wrote:
// PostgreSQL's text adds one space per structural ':' or ',' and never writes a string longer
// than encoding/json does (which also escapes <, > and &), so a payload under a limit by this
// bound needs no walk.
func MaxSentBytes(payload []byte) int {
	return len(payload) + bytes.Count(payload, []byte{':'}) + bytes.Count(payload, []byte{','})
}

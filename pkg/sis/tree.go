package sis

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// node is one element. Nodes live in one slice (tree.nodes) and link by index, so a 2,000-flight
// schedule costs a few slice growths instead of a heap object per element.
type node struct {
	name  string
	attrs []xml.Attr
	// text is the element's own character data. Leading white-space-only chunks are dropped:
	// values are trimmed anyway, and containers then carry no text at all.
	text string
	// first/last child and next sibling; -1 for none. int32 keeps a node at 80 bytes; the
	// element limit keeps indices far below 2^31.
	first, last, next int32
	// innerStart/innerEnd delimit the element's content in the source, for raw capture.
	innerStart, innerEnd int
}

type tree struct {
	src   string
	nodes []node // nodes[0] is the root element
}

type limits struct {
	maxDepth    int
	maxElements int
}

// parseTree reads src with encoding/xml in strict mode into a tree, enforcing the limits. It
// never expands entities beyond XML's five predefined ones (strict mode rejects any other
// reference) and rejects every <!...> directive, so DOCTYPE and ENTITY declarations never reach
// the parser's state.
func parseTree(src string, lim limits) (*tree, error) {
	d := xml.NewDecoder(strings.NewReader(src))
	d.Strict = true
	// The inbox column already holds characters; an encoding="GBK" declaration describes bytes
	// that no longer exist, so the reader is passed through untouched.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }

	t := &tree{src: src, nodes: make([]node, 0, estimateElements(src, lim.maxElements))}
	stack := make([]int32, 0, 16)
	// Text split by comments, CDATA or child elements arrives in pieces; appending pieces to a
	// string would copy quadratically ("a<!---->" repeated), so an element's second piece moves
	// its text into a builder that is flushed when the element ends.
	pieces := map[int32]*strings.Builder{}
	rootClosed := false
	prev := 0 // offset where the next token starts

	path := func() string {
		if len(stack) == 0 {
			return "/"
		}
		var b strings.Builder
		for _, i := range stack {
			b.WriteByte('/')
			b.WriteString(t.nodes[i].name)
		}
		return b.String()
	}

	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, malformed(path(), "not well-formed XML: "+err.Error(), err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if rootClosed {
				return nil, malformed("/", fmt.Sprintf("element <%s> after the root element", qname(tk.Name)), nil)
			}
			if len(stack) >= lim.maxDepth {
				return nil, malformed(path(), fmt.Sprintf("nesting deeper than %d elements", lim.maxDepth), nil)
			}
			if len(t.nodes) >= lim.maxElements {
				return nil, malformed(path(), fmt.Sprintf("more than %d elements", lim.maxElements), nil)
			}
			if dup := duplicateAttr(tk.Attr); dup != "" {
				return nil, malformed(path()+"/"+qname(tk.Name), "attribute "+dup+" appears twice", nil)
			}
			idx := int32(len(t.nodes))
			t.nodes = append(t.nodes, node{
				name: qname(tk.Name), attrs: tk.Attr,
				first: -1, last: -1, next: -1,
				innerStart: int(d.InputOffset()),
			})
			if len(stack) > 0 {
				p := &t.nodes[stack[len(stack)-1]]
				if p.last >= 0 {
					t.nodes[p.last].next = idx
				} else {
					p.first = idx
				}
				p.last = idx
			}
			stack = append(stack, idx)
		case xml.EndElement:
			// RawToken does not pair tags (Token would, but also resolves namespaces we do not use).
			if len(stack) == 0 {
				// A stray end tag after the root is tolerated: the legacy Jackson decoder stopped
				// at the root's end, and a shared sample (ABNR-ADD-ABNR-3) ends in "</MSG></MSG>".
				// A second element or text there is still refused, so two concatenated messages
				// cannot pass as one.
				if rootClosed {
					break
				}
				return nil, malformed("/", fmt.Sprintf("unexpected end tag </%s>", qname(tk.Name)), nil)
			}
			top := stack[len(stack)-1]
			if name := qname(tk.Name); name != t.nodes[top].name {
				return nil, malformed(path(), fmt.Sprintf("element <%s> closed by </%s>", t.nodes[top].name, name), nil)
			}
			t.nodes[top].innerEnd = prev
			if b, ok := pieces[top]; ok {
				t.nodes[top].text = b.String()
				delete(pieces, top)
			}
			stack = stack[:len(stack)-1]
			rootClosed = len(stack) == 0
		case xml.CharData:
			if len(stack) == 0 {
				if !isSpace(tk) {
					return nil, malformed("/", "text outside the root element", nil)
				}
				break
			}
			top := stack[len(stack)-1]
			n := &t.nodes[top]
			if b, ok := pieces[top]; ok {
				b.Write(tk)
				break
			}
			if n.text == "" {
				if isSpace(tk) {
					break
				}
				// Usually the token is the source verbatim (no entity, CDATA or CR LF to
				// rewrite): then a substring of the source is the value, without a copy.
				if end := int(d.InputOffset()); end-prev == len(tk) && src[prev:end] == string(tk) {
					n.text = src[prev:end]
				} else {
					n.text = string(tk)
				}
				break
			}
			b := &strings.Builder{}
			b.WriteString(n.text)
			b.Write(tk)
			pieces[top] = b
		case xml.Directive:
			return nil, malformed(path(), "DOCTYPE, ENTITY and other <!...> declarations are not accepted", nil)
		case xml.Comment, xml.ProcInst:
			// Comments carry nothing; the declaration's encoding is neutralised by CharsetReader.
		}
		prev = int(d.InputOffset())
	}
	if len(stack) > 0 {
		return nil, malformed(path(), "not well-formed XML: unexpected end of input", io.ErrUnexpectedEOF)
	}
	if len(t.nodes) == 0 {
		return nil, malformed("/", "no root element", nil)
	}
	return t, nil
}

// estimateElements sizes the node slice so a large schedule does not regrow it repeatedly:
// SIS averages about 18 bytes per element. The reservation is capped so that a hostile input
// cannot make the decoder reserve memory ahead of the elements it really has.
func estimateElements(src string, maxElements int) int {
	return min(len(src)/16+1, maxElements, 1<<18)
}

// duplicateAttr returns the name of an attribute given twice (a well-formedness error that
// encoding/xml lets through), or "". Sets of attributes are tiny in SIS; a map is used only for
// large ones so a hostile element cannot make the check quadratic.
func duplicateAttr(attrs []xml.Attr) string {
	if len(attrs) <= 16 {
		for i := 1; i < len(attrs); i++ {
			for j := 0; j < i; j++ {
				if attrs[i].Name == attrs[j].Name {
					return qname(attrs[i].Name)
				}
			}
		}
		return ""
	}
	seen := make(map[xml.Name]struct{}, len(attrs))
	for _, a := range attrs {
		if _, ok := seen[a.Name]; ok {
			return qname(a.Name)
		}
		seen[a.Name] = struct{}{}
	}
	return ""
}

func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// isSpace reports whether b is XML white space only (space, tab, CR, LF).
func isSpace(b []byte) bool {
	for _, c := range b {
		if !isSpaceByte(c) {
			return false
		}
	}
	return true
}

// trim removes XML white space at both ends. Unicode spaces such as U+3000 are content in
// Chinese remarks and are kept.
func trim(s string) string {
	i, j := 0, len(s)
	for i < j && isSpaceByte(s[i]) {
		i++
	}
	for j > i && isSpaceByte(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func (t *tree) hasChildren(i int32) bool { return t.nodes[i].first >= 0 }

// inner returns the element's content exactly as sent, trimmed.
func (t *tree) inner(i int32) string {
	n := &t.nodes[i]
	if n.innerEnd < n.innerStart {
		return ""
	}
	return trim(t.src[n.innerStart:n.innerEnd])
}

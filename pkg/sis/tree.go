package sis

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// node is one element. Nodes live in chunks (tree.chunks) and link by index, so a 2,000-flight
// schedule costs a few chunk allocations instead of a heap object per element, and the store
// never copies itself to grow: a flood of elements costs its nodes once, not the five times over
// that a slice regrown by append would allocate.
type node struct {
	name  string
	attrs []xml.Attr
	// text is the element's own character data. Leading white-space-only chunks are dropped:
	// values are trimmed anyway, and containers then carry no text at all.
	text string
	// first/last child and next sibling; -1 for none. int32 keeps indices small; the element
	// limit keeps them far below 2^31.
	first, last, next int32
	// innerStart/innerEnd delimit the element's content in the source, for raw capture.
	innerStart, innerEnd int
}

// chunkBits sizes the node store's chunks: 1,024 nodes, about 90 KB.
const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
)

type tree struct {
	src string
	// chunks hold the nodes: node i is chunks[i>>chunkBits][i&chunkMask]; node 0 is the root
	// element. Every chunk but the first is allocated whole; the first grows with the message,
	// so a small FLOP stays small.
	chunks [][]node
	count  int
}

func (t *tree) at(i int32) *node { return &t.chunks[i>>chunkBits][i&chunkMask] }

func (t *tree) add(n node, firstChunk int) int32 {
	idx := int32(t.count)
	c := int(idx >> chunkBits)
	if c == len(t.chunks) {
		capacity := chunkSize
		if c == 0 {
			capacity = firstChunk
		}
		t.chunks = append(t.chunks, make([]node, 0, capacity))
	}
	t.chunks[c] = append(t.chunks[c], n)
	t.count++
	return idx
}

type limits struct {
	maxDepth int
	// maxNodes bounds elements and attributes together: each costs memory of the same order.
	maxNodes int
	maxText  int
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

	b := &treeBuilder{
		t: &tree{src: src}, d: d, lim: lim,
		firstChunk: estimateElements(src),
		stack:      make([]int32, 0, 16),
		pieces:     map[int32]*strings.Builder{},
	}
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, malformed(b.t.pathOf(b.stack), "not well-formed XML: "+err.Error(), err)
		}
		if err := b.token(tok); err != nil {
			return nil, err
		}
		b.prev = int(d.InputOffset())
	}
	return b.finish()
}

// treeBuilder is parseTree's state between tokens: one method per kind of token.
type treeBuilder struct {
	t          *tree
	d          *xml.Decoder
	lim        limits
	firstChunk int
	stack      []int32
	// Text split by comments, CDATA or child elements arrives in pieces; appending pieces to a
	// string would copy quadratically ("a<!---->" repeated), so an element's second piece moves
	// its text into a builder that is flushed when the element ends.
	pieces     map[int32]*strings.Builder
	rootClosed bool
	prev       int // offset where the next token starts
	nodes      int // elements and attributes so far
}

func (b *treeBuilder) token(tok xml.Token) error {
	switch tk := tok.(type) {
	case xml.StartElement:
		return b.start(tk)
	case xml.EndElement:
		return b.end(tk)
	case xml.CharData:
		return b.text(tk)
	case xml.Directive:
		return malformed(b.t.pathOf(b.stack), "DOCTYPE, ENTITY and other <!...> declarations are not accepted", nil)
	case xml.Comment, xml.ProcInst:
		// Comments carry nothing; the declaration's encoding is neutralised by CharsetReader.
	}
	return nil
}

func (b *treeBuilder) start(tk xml.StartElement) error {
	t, lim := b.t, b.lim
	if b.rootClosed {
		return malformed("/", fmt.Sprintf("element <%s> after the root element", qname(tk.Name)), nil)
	}
	if len(b.stack) >= lim.maxDepth {
		return malformed(t.pathOf(b.stack), fmt.Sprintf("nesting deeper than %d elements", lim.maxDepth), nil)
	}
	// Counted before the attributes are looked at: a start tag with a million attributes must
	// not reach the duplicate check's map.
	if b.nodes += 1 + len(tk.Attr); b.nodes > lim.maxNodes {
		return malformed(t.pathOf(b.stack), fmt.Sprintf("more than %d elements and attributes", lim.maxNodes), nil)
	}
	idx := t.add(node{
		name: qname(tk.Name), attrs: tk.Attr,
		first: -1, last: -1, next: -1,
		innerStart: int(b.d.InputOffset()),
	}, b.firstChunk)
	if len(b.stack) > 0 {
		p := t.at(b.stack[len(b.stack)-1])
		if p.last >= 0 {
			t.at(p.last).next = idx
		} else {
			p.first = idx
		}
		p.last = idx
	}
	b.stack = append(b.stack, idx)
	if dup := duplicateAttr(tk.Attr); dup != "" {
		return malformed(t.pathOf(b.stack), "attribute "+dup+" appears twice", nil)
	}
	for _, a := range tk.Attr {
		if n := len(trim(a.Value)); n > lim.maxText {
			return malformed(t.pathOf(b.stack)+"/@"+qname(a.Name), textTooLong("attribute "+qname(a.Name), n, lim.maxText), nil)
		}
	}
	return nil
}

func (b *treeBuilder) end(tk xml.EndElement) error {
	t := b.t
	// RawToken does not pair tags (Token would, but also resolves namespaces we do not use).
	if len(b.stack) == 0 {
		// A stray end tag after the root is tolerated: the legacy Jackson decoder stopped at the
		// root's end, and a shared sample (ABNR-ADD-ABNR-3) ends in "</MSG></MSG>". A second
		// element or text there is still refused, so two concatenated messages cannot pass as
		// one.
		if b.rootClosed {
			return nil
		}
		return malformed("/", fmt.Sprintf("unexpected end tag </%s>", qname(tk.Name)), nil)
	}
	top := b.stack[len(b.stack)-1]
	n := t.at(top)
	if name := qname(tk.Name); name != n.name {
		return malformed(t.pathOf(b.stack), fmt.Sprintf("element <%s> closed by </%s>", n.name, name), nil)
	}
	n.innerEnd = b.prev
	if pb, ok := b.pieces[top]; ok {
		n.text = pb.String()
		delete(b.pieces, top)
	}
	if l := len(trim(n.text)); l > b.lim.maxText {
		return malformed(t.pathOf(b.stack), textTooLong("the text of "+n.name, l, b.lim.maxText), nil)
	}
	b.stack = b.stack[:len(b.stack)-1]
	b.rootClosed = len(b.stack) == 0
	return nil
}

func (b *treeBuilder) text(tk xml.CharData) error {
	if len(b.stack) == 0 {
		if !isSpace(tk) {
			return malformed("/", "text outside the root element", nil)
		}
		return nil
	}
	top := b.stack[len(b.stack)-1]
	n := b.t.at(top)
	if pb, ok := b.pieces[top]; ok {
		pb.Write(tk)
		return nil
	}
	if n.text == "" {
		if isSpace(tk) {
			return nil
		}
		// Usually the token is the source verbatim (no entity, CDATA or CR LF to rewrite): then
		// a substring of the source is the value, without a copy.
		src := b.t.src
		if end := int(b.d.InputOffset()); end-b.prev == len(tk) && src[b.prev:end] == string(tk) {
			n.text = src[b.prev:end]
		} else {
			n.text = string(tk)
		}
		return nil
	}
	pb := &strings.Builder{}
	pb.WriteString(n.text)
	pb.Write(tk)
	b.pieces[top] = pb
	return nil
}

func (b *treeBuilder) finish() (*tree, error) {
	if len(b.stack) > 0 {
		return nil, malformed(b.t.pathOf(b.stack), "not well-formed XML: unexpected end of input", io.ErrUnexpectedEOF)
	}
	if b.t.count == 0 {
		return nil, malformed("/", "no root element", nil)
	}
	return b.t, nil
}

func textTooLong(what string, n, limit int) string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d bytes per value (codec.max-text)", what, n, limit)
}

// pathOf names the innermost element of stack the way the decoder's paths do, so a limit found
// while reading points at the same place a rule found later would: an element is indexed
// (1-based) when it is the second or later of its name among its siblings, and always when it
// is one the decoder always indexes (a flight collection item, a FLTR, a reference or RSTA
// record under MSG). Only errors call it: it walks the siblings seen so far.
func (t *tree) pathOf(stack []int32) string {
	if len(stack) == 0 {
		return "/"
	}
	var b strings.Builder
	for depth, i := range stack {
		n := t.at(i)
		b.WriteByte('/')
		b.WriteString(n.name)
		if depth == 0 {
			continue
		}
		k := 0
		for c := t.at(stack[depth-1]).first; c >= 0; c = t.at(c).next {
			if t.at(c).name == n.name {
				k++
			}
			if c == i {
				break
			}
		}
		if k > 1 || alwaysIndexed(n.name, depth) {
			b.WriteString("[" + strconv.Itoa(k) + "]")
		}
	}
	return b.String()
}

// alwaysIndexed reports whether the decoder's paths index an element of this name at this depth
// (the root is depth 0) even when it is the only one.
func alwaysIndexed(name string, depth int) bool {
	if name == "FLTR" {
		return true
	}
	if depth == 1 {
		return RefKeyTag(name) != "" || name == "RSTA"
	}
	_, collection := collectionSeq(name)
	return collection
}

// estimateElements sizes the first chunk of the node store: SIS averages about 18 bytes per
// element, and a small message should not reserve a whole chunk.
func estimateElements(src string) int {
	return min(len(src)/16+1, chunkSize)
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

func (t *tree) hasChildren(i int32) bool { return t.at(i).first >= 0 }

// inner returns the element's content exactly as sent, trimmed.
func (t *tree) inner(i int32) string {
	n := t.at(i)
	if n.innerEnd < n.innerStart {
		return ""
	}
	return trim(t.src[n.innerStart:n.innerEnd])
}

package sis

import "fmt"

// collectionSeq returns the sequence attribute of a flight collection tag (R-FLIGHT-3) and
// whether tag is a collection at all. DELY is a collection without a sequence attribute.
func collectionSeq(tag string) (string, bool) {
	switch tag {
	case "GTDT":
		return "GTNO", true
	case "CKDT":
		return "CKNO", true
	case "CLDT":
		return "CLNO", true
	case "CHDT":
		return "CHNO", true
	case "PSDT":
		return "PSNO", true
	case "CHOT":
		return "CSNO", true
	case "ROUT", "ERUT":
		return "RTNO", true
	case "ABTM":
		return "ASNO", true
	case "DELY":
		return "", true
	}
	return "", false
}

// CollectionLimit returns the most elements one flight record may carry of collection tag, or 0
// when tag is not a bounded collection. The figures are R-FLIGHT-3's SIS limits (from
// the SIS interface specification): GTDT CKDT CLDT CHDT CHOT ABTM 99, PSDT 9, ROUT 6, ERUT 7.
// DELY has none there ("—"); it gets 99 like the allocation collections, since an unbounded
// list from one message becomes as many rows and one ever larger event. SRVT and VIPF are
// unbounded by the seed and are kept raw, not as collections.
func CollectionLimit(tag string) int {
	switch tag {
	case "GTDT", "CKDT", "CLDT", "CHDT", "CHOT", "ABTM", "DELY":
		return 99
	case "PSDT":
		return 9
	case "ROUT":
		return 6
	case "ERUT":
		return 7
	}
	return 0
}

// IsTimeTag reports whether a flight tag (scalar, collection child or DELY attribute) carries a
// body time. The set comes from the samples: every one of these holds ddMMMyyHHmm there (SCAT and
// SCDT also HHmm in seasonal routes). FTSS is deliberately absent although the design groups it
// with the times: the samples carry text in it ("DELY", "RCFLOP").
func IsTimeTag(tag string) bool {
	switch tag {
	// Scalars.
	case "SODT", "ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT",
		"NEAT", "PEDT", "CNCL", "COBT", "CTOT", "EOBT", "TOBT", "IEST":
		return true
	// Collection children and the DELY start attribute.
	case "PGOT", "PGCT", "GOTM", "GCTM", "PCOT", "PCCT", "COTM", "CCTM", "PCBT", "PCET", "CBTM",
		"CETM", "STST", "STET", "CHTM", "SCAT", "SCDT", "AOTM", "STRT":
		return true
	}
	return false
}

// knownScalar lists the flight tags that must be plain text; anything else with child elements is
// kept raw instead of being rejected.
func knownScalar(tag string) bool {
	switch tag {
	case "ALCD", "ALSC", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "RENO",
		"TAOP", "TAFL", "TAID", "TRML", "CSOP", "CSFT", "MAID",
		"ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT", "NEAT",
		"PEDT", "FTSS", "COBT", "CTOT", "EOBT", "TOBT", "IEST",
		"STND", "PHAG", "FHAG", "MHAG", "CNCL", "REMC", "MAXP", "VIPP", "VIPR", "LBNO", "LBWT",
		"PAXC", "EXSC", "EXSR", "FDIV", "FRET", "FLAB", "FDEL", "BDPB":
		return true
	}
	return false
}

// flight decodes a FLOP body or one SCHD FLTR at element i; path is that element's path.
func (d *decoder) flight(i int32, path string) (FlightRecord, *DecodeError) {
	n := d.node(i)
	children := 0
	for c := n.first; c >= 0; c = d.node(c).next {
		children++
	}
	rec := FlightRecord{
		// A record has a few dozen scalars; a hint of one per child would let a flood of
		// repeated elements reserve a map sized for all of them.
		Scalars:     make(map[string]Field, min(children, 64)),
		Collections: make(map[string]*Collection),
		Raw:         make(map[string][]string),
		Order:       make([]string, 0, children),
	}
	if trim(n.text) != "" {
		d.codec(path, "unexpected text in "+n.name, nil)
	}
	flidSeen := false
	for c := n.first; c >= 0; c = d.node(c).next {
		cn := d.node(c)
		tag := cn.name
		rec.Order = append(rec.Order, tag)
		switch tag {
		case "FLID":
			if flidSeen {
				return rec, malformed(path+"/FLID", "repeated FLID: the flight is ambiguous", nil)
			}
			if d.t.hasChildren(c) {
				return rec, malformed(path+"/FLID", "FLID must be text, not elements", nil)
			}
			flidSeen, rec.FLID = true, trim(cn.text)
			continue
		case "FFID":
			if rec.FFID.Present {
				d.codec(path+"/FFID", "repeated FFID", nil)
				continue
			}
			if d.t.hasChildren(c) {
				d.codec(path+"/FFID", "FFID has child elements where text was expected", nil)
				continue
			}
			rec.FFID = Field{Present: true, Value: trim(cn.text)}
			continue
		case "SRVT", "VIPF":
			rec.Raw[tag] = append(rec.Raw[tag], d.t.inner(c))
			continue
		}
		if seq, ok := collectionSeq(tag); ok {
			col := rec.Collections[tag]
			if col == nil {
				col = &Collection{}
				rec.Collections[tag] = col
			}
			// Over the SIS limit the message breaks its contract: MALFORMED, found at the first
			// element too many, before any more items are built.
			if limit := CollectionLimit(tag); len(col.Items) == limit {
				return rec, malformed(indexed(path, tag, limit+1),
					fmt.Sprintf("more than %d %s elements in one flight (the SIS limit, R-FLIGHT-3)", limit, tag), nil)
			}
			col.Items = append(col.Items, d.item(c, tag, seq, path, len(col.Items)+1))
			continue
		}
		if d.t.hasChildren(c) {
			if knownScalar(tag) {
				d.codec(path+"/"+tag, tag+" has child elements where text was expected", nil)
				continue
			}
			rec.Raw[tag] = append(rec.Raw[tag], d.t.inner(c))
			continue
		}
		if _, dup := rec.Scalars[tag]; dup {
			d.codec(path+"/"+tag, "repeated "+tag+": which value applies is ambiguous", nil)
			continue
		}
		f := Field{Present: true, Value: trim(cn.text)}
		rec.Scalars[tag] = f
		if IsTimeTag(tag) {
			if err := d.timeErr(f); err != nil {
				d.badTime(path+"/"+tag, tag, f, err)
			}
		}
		for _, a := range cn.attrs {
			name := tag + "_" + qname(a.Name)
			if _, dup := rec.Scalars[name]; dup {
				d.codec(path+"/"+tag, "attribute "+qname(a.Name)+" collides with another field", nil)
				continue
			}
			rec.Scalars[name] = Field{Present: true, Value: trim(a.Value)}
		}
	}
	if !flidSeen || rec.FLID == "" {
		return rec, malformed(path+"/FLID", "flight without FLID", nil)
	}
	// A fixed order keeps the reported CODEC_ERROR deterministic (map order is not).
	for _, tag := range [...]string{"GTDT", "CKDT", "CLDT", "CHDT", "PSDT", "CHOT", "DELY", "ABTM", "ROUT", "ERUT"} {
		if col := rec.Collections[tag]; col != nil {
			d.settleNoAllocation(tag, col, path)
		}
	}
	return rec, nil
}

// item decodes the k-th element of collection tag in the record at recPath. Paths are built only
// for errors: a schedule has tens of thousands of items.
func (d *decoder) item(i int32, tag, seqAttr, recPath string, k int) Item {
	n := d.node(i)
	path := func() string { return indexed(recPath, tag, k) }
	it := Item{Fields: make(map[string]Field, 8)}
	for _, a := range n.attrs {
		name := qname(a.Name)
		if seqAttr != "" && name == seqAttr {
			it.Seq = trim(a.Value)
			continue
		}
		f := Field{Present: true, Value: trim(a.Value)}
		it.Fields[name] = f
		if IsTimeTag(name) {
			if err := d.timeErr(f); err != nil {
				d.badTime(path()+"/@"+name, name, f, err)
			}
		}
	}
	if tag == "DELY" {
		// A delay is attributes plus free text; child elements have no place in it.
		if d.t.hasChildren(i) {
			d.codec(path(), "DELY has child elements; expected attributes and text", nil)
		}
		it.Fields["TEXT"] = Field{Present: true, Value: trim(n.text)}
		return it
	}
	if trim(n.text) != "" {
		d.codec(path(), "unexpected text in "+tag, nil)
	}
	for c := n.first; c >= 0; c = d.node(c).next {
		cn := d.node(c)
		if d.t.hasChildren(c) {
			d.codec(path()+"/"+cn.name, cn.name+" has child elements where text was expected", nil)
			continue
		}
		if _, dup := it.Fields[cn.name]; dup {
			d.codec(path()+"/"+cn.name, "repeated "+cn.name+" in one "+tag, nil)
			continue
		}
		f := Field{Present: true, Value: trim(cn.text)}
		it.Fields[cn.name] = f
		if IsTimeTag(cn.name) {
			if err := d.timeErr(f); err != nil {
				d.badTime(path()+"/"+cn.name, cn.name, f, err)
			}
		}
	}
	return it
}

// settleNoAllocation turns a collection sent as its single …NO="0" element (or a single bare
// <DELY/>) into "no allocation now" (R-FLOP-GTDT). A "0" element among real ones contradicts
// itself, which this codec cannot interpret.
func (d *decoder) settleNoAllocation(tag string, col *Collection, path string) {
	if tag == "DELY" {
		if len(col.Items) == 1 && len(col.Items[0].Fields) == 1 && col.Items[0].Fields["TEXT"].Value == "" {
			col.NoAllocation, col.Items = true, nil
		}
		return
	}
	for k, it := range col.Items {
		if it.Seq != "0" {
			continue
		}
		if len(col.Items) == 1 {
			col.NoAllocation, col.Items = true, nil
			return
		}
		seq, _ := collectionSeq(tag)
		d.codec(indexed(path, tag, k+1), fmt.Sprintf("%s=\"0\" (no allocation) sent together with %d other %s elements", seq, len(col.Items)-1, tag), nil)
		return
	}
}

package sis

import "fmt"

// RefKeyTag returns the key tag of a reference category (R-REF-1), or "" when category is
// not one of the 13. CLST and CHLT share CCOD; only the category tells them apart.
func RefKeyTag(category string) string {
	switch category {
	case "COUL":
		return "COUC"
	case "ARPT":
		return "ITCD"
	case "AIRL":
		return "ITOP"
	case "AIRC":
		return "ITAT"
	case "REGN":
		return "RNUM"
	case "ORGN":
		return "OGID"
	case "FLTL":
		return "FTYP"
	case "TLST":
		return "TCOD"
	case "GLST":
		return "GCOD"
	case "SLST":
		return "SCOD"
	case "CLST", "CHLT":
		return "CCOD"
	case "BLST":
		return "BCOD"
	}
	return ""
}

// schd decodes <SCHD><RECS/><FLTR/>…</SCHD>.
func (d *decoder) schd(styp string) (Body, *DecodeError) {
	b, err := d.single("SCHD")
	if err != nil {
		return nil, err
	}
	s := &Schd{STYP: styp, RECS: RECSAbsent}
	n := d.node(b)
	if trim(n.text) != "" {
		d.codec("/MSG/SCHD", "unexpected text in SCHD", nil)
	}
	count, recsSeen := 0, false
	for c := n.first; c >= 0; c = d.node(c).next {
		if d.node(c).name == "FLTR" {
			count++
		}
	}
	s.Records = make([]FlightRecord, 0, count)
	for c := n.first; c >= 0; c = d.node(c).next {
		switch name := d.node(c).name; name {
		case "RECS":
			if recsSeen {
				d.codec("/MSG/SCHD/RECS", "repeated RECS", nil)
				continue
			}
			recsSeen = true
			s.RECS = d.recs(c, "/MSG/SCHD/RECS")
		case "FLTR":
			rec, err := d.flight(c, indexed("/MSG/SCHD", "FLTR", len(s.Records)+1))
			if err != nil {
				return nil, err
			}
			s.Records = append(s.Records, rec)
		default:
			d.codec("/MSG/SCHD/"+name, "unexpected element in SCHD", nil)
		}
	}
	return s, nil
}

// recordsUnderMSG walks MSG's children for the reference shape: META, at most one RECS, and the
// records named like the category. It calls each for every record element and returns RECS.
func (d *decoder) recordsUnderMSG(category string, each func(i int32, k int) *DecodeError) (int, *DecodeError) {
	root := d.node(0)
	if trim(root.text) != "" {
		d.codec("/MSG", "unexpected text directly under MSG", nil)
	}
	recs, recsSeen, k := RECSAbsent, false, 0
	for c := root.first; c >= 0; c = d.node(c).next {
		switch name := d.node(c).name; name {
		case "META":
		case "RECS":
			if recsSeen {
				d.codec("/MSG/RECS", "repeated RECS", nil)
				continue
			}
			recsSeen = true
			recs = d.recs(c, "/MSG/RECS")
		case category:
			k++
			if err := each(c, k); err != nil {
				return recs, err
			}
		default:
			d.codec("/MSG/"+name, "unexpected element in a "+category+" message", nil)
		}
	}
	if !recsSeen && k == 0 {
		return recs, malformed("/MSG/"+category, "payload missing: neither RECS nor any "+category+" record", nil)
	}
	return recs, nil
}

func (d *decoder) refData(category, styp string) (Body, *DecodeError) {
	r := &RefData{Category: category, STYP: styp}
	key := RefKeyTag(category)
	recs, err := d.recordsUnderMSG(category, func(i int32, k int) *DecodeError {
		rec, err := d.refRecord(i, key, indexed("/MSG", category, k))
		if err != nil {
			return err
		}
		r.Records = append(r.Records, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.RECS = recs
	return r, nil
}

func (d *decoder) refRecord(i int32, keyTag, path string) (RefRecord, *DecodeError) {
	var rec RefRecord
	n := d.node(i)
	if trim(n.text) != "" {
		d.codec(path, "unexpected text in "+n.name, nil)
	}
	keySeen := false
	for c := n.first; c >= 0; c = d.node(c).next {
		f := d.refField(c)
		if f.Tag == keyTag {
			// The key is the record's identity (RTYPE, RKEY); without exactly one there is
			// nothing to apply the record to, as with a flight without FLID.
			if keySeen {
				return rec, malformed(path+"/"+keyTag, "repeated key "+keyTag+": the record is ambiguous", nil)
			}
			if f.Children != nil {
				return rec, malformed(path+"/"+keyTag, keyTag+" must be text, not elements", nil)
			}
			keySeen, rec.Key = true, f.Value
		}
		rec.Fields = append(rec.Fields, f)
	}
	if rec.Key == "" {
		return rec, malformed(path+"/"+keyTag, "record without its key "+keyTag, nil)
	}
	return rec, nil
}

// refField copies an element recursively; depth is bounded by Options.MaxDepth.
func (d *decoder) refField(i int32) RefField {
	n := d.node(i)
	f := RefField{Tag: n.name, Value: trim(n.text)}
	if len(n.attrs) > 0 {
		f.Attrs = make(map[string]string, len(n.attrs))
		for _, a := range n.attrs {
			f.Attrs[qname(a.Name)] = trim(a.Value)
		}
	}
	for c := n.first; c >= 0; c = d.node(c).next {
		f.Children = append(f.Children, d.refField(c))
	}
	return f
}

// rsta decodes resource status records. The record shape is inferred (no sample, no spec):
// <RSTA><RTYP/><RSID/><STAT/><STRT/><ENDT/></RSTA> under MSG like other reference data.
func (d *decoder) rsta(styp string) (Body, *DecodeError) {
	r := &ResourceStatus{STYP: styp}
	recs, err := d.recordsUnderMSG("RSTA", func(i int32, k int) *DecodeError {
		path := indexed("/MSG", "RSTA", k)
		f := d.leafFields(i, path, "RTYP", "RSID", "STAT", "STRT", "ENDT")
		rec := RSTARecord{
			RTYP: f["RTYP"].Value, RSID: f["RSID"].Value, STAT: f["STAT"].Value,
			Start: f["STRT"], End: f["ENDT"],
		}
		// (RTYP, RSID) is the record's identity in REF_MASTER.
		if rec.RTYP == "" {
			return malformed(path+"/RTYP", "resource status without RTYP", nil)
		}
		if rec.RSID == "" {
			return malformed(path+"/RSID", "resource status without RSID", nil)
		}
		switch rec.RTYP {
		case "BELT", "CNTR", "GATE", "STND":
		default:
			d.codec(path+"/RTYP", fmt.Sprintf("RTYP %q is not BELT, CNTR, GATE or STND", rec.RTYP), nil)
		}
		if rec.STAT != "E" && rec.STAT != "D" {
			d.codec(path+"/STAT", fmt.Sprintf("STAT %q is not E or D", rec.STAT), nil)
		}
		d.checkTime(path+"/STRT", "STRT", rec.Start)
		d.checkTime(path+"/ENDT", "ENDT", rec.End)
		r.Records = append(r.Records, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.RECS = recs
	return r, nil
}

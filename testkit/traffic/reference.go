package traffic

import (
	"fmt"
	"strconv"
	"time"
)

// refRecord is one reference-data record: its category and its children in order.
type refRecord struct {
	category string
	fields   []refField
}

// refField is one child; repeated tags are allowed and keep their order (docs/sis-format.md).
type refField struct{ tag, attrs, text string }

func fields(kv ...string) []refField {
	out := make([]refField, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, refField{tag: kv[i], text: kv[i+1]})
	}
	return out
}

// airlinesToAdd are real Chinese carriers that do not fly in the generated schedule, so adding
// them is a genuine new record: IATA, ICAO, English and Chinese names.
var airlinesToAdd = [][4]string{
	{"DR", "RLH", "RUILI AIRLINES", "瑞丽航空"},
	{"JR", "JOY", "JOY AIR", "幸福航空"},
	{"QW", "QDA", "QINGDAO AIRLINES", "青岛航空"},
	{"UQ", "CUH", "URUMQI AIR", "乌鲁木齐航空"},
}

// referenceRecord returns the i-th reference change of the day. Changes come in rounds of
// seven in which every UPD follows the ADD of the same key, so each is valid whatever the
// reference table held before (an UPD of an unknown key is left to issue 13's rules).
// ADD and UPD carry the whole record (R-REF-3: single-record full-field increments).
func referenceRecord(i int) (styp string, rec refRecord) {
	round := i / 7
	gate := fmt.Sprintf("G%d", 29+round) // T1 gates end at G28
	al := airlinesToAdd[round%len(airlinesToAdd)]
	glst := func(name, cat, pier string) refRecord {
		return refRecord{category: "GLST", fields: fields("GCOD", gate, "GTNM", "Gate "+gate[1:], "GNMC", name, "GCAT", cat, "GTML", "T1", "PIER", pier)}
	}
	airl := func(trml string) refRecord {
		f := fields("ITOP", al[0], "ICOP", al[1], "ONAM", al[2], "ONMC", al[3], "CTRY", "PRC")
		f = append(f,
			refField{tag: "TRML", attrs: `MVIN="A" FLIN="D"`, text: trml},
			refField{tag: "TRML", attrs: `MVIN="D" FLIN="D"`, text: trml},
			refField{tag: "DORI", text: "D"})
		return refRecord{category: "AIRL", fields: f}
	}
	switch i % 7 {
	case 0:
		return "ADD", glst(gate[1:]+"号登机口", "D", "A")
	case 1:
		return "ADD", airl("T1")
	case 2:
		stand := fmt.Sprintf("5%02d", 61+round) // remote stands 501–560 exist
		return "ADD", refRecord{category: "SLST", fields: fields("SCOD", stand, "STNM", "Remote Stand "+stand, "SNMC", "远机位"+stand, "SATC", "C", "STGP", "WEST", "STML", "T1", "REMT", "Y")}
	case 3:
		return "UPD", glst(gate[1:]+"号登机口（国际）", "I", "A")
	case 4:
		return "UPD", airl("T2")
	case 5:
		belt := fmt.Sprintf("B%02d", 17+round) // T2 belts B01–B16 exist
		return "ADD", refRecord{category: "BLST", fields: fields("BCOD", belt, "BTNM", "Belt "+belt[1:], "BNMC", belt[1:]+"号行李转盘", "BCAT", "D", "BTML", "T2")}
	default:
		ctr := fmt.Sprintf("L%02d", 1+round)
		return "ADD", refRecord{category: "CLST", fields: fields("CCOD", ctr, "CTNM", "Counter "+ctr, "CNMC", "L区"+ctr[1:]+"号值机柜台", "CCAT", "D", "CTML", "T2", "CTRA", "Y")}
	}
}

// refBody renders <RECS>n</RECS> and the records directly under MSG, as the samples do.
func refBody(recs ...refRecord) string {
	var b body
	b.leaf(1, "RECS", strconv.Itoa(len(recs)))
	for _, rec := range recs {
		b.open(1, rec.category)
		for _, f := range rec.fields {
			b.leafAttrs(2, f.tag, f.attrs, f.text)
		}
		b.close(1, rec.category)
	}
	return b.String()
}

func referenceItem(at time.Time, i int) item {
	styp, rec := referenceRecord(i)
	inner := refBody(rec)
	return item{
		at: at, kind: KindReference, want: Succeeded, typ: rec.category, styp: styp,
		render: func(sndr string, seqn int64, dttm time.Time) string {
			return envelope(sndr, seqn, dttm, rec.category, styp, inner)
		},
	}
}

// delayCodes are IATA delay codes with the Chinese description an AODB at a Chinese airport
// would carry.
var delayCodes = [][4]string{
	{"WO", "71", "DEPARTURE STATION WEATHER", "起飞站天气原因"},
	{"AT", "81", "ATFM DUE TO ATC EN-ROUTE DEMAND", "航路流量控制"},
	{"RA", "93", "AIRCRAFT ROTATION, LATE ARRIVAL", "前序航班晚到"},
}

// dlylItem is a delay-code list addition: a category upstream sends but msgexchange does
// not process, so legal and unsupported (docs/sis-format.md).
func dlylItem(at time.Time, i int) item {
	dc := delayCodes[i%len(delayCodes)]
	inner := refBody(refRecord{category: "DLYL", fields: fields("DCOD", dc[0], "DCDN", dc[1], "DDES", dc[2], "DDSC", dc[3])})
	return item{
		at: at, kind: KindUnsupported, want: Skipped, typ: "DLYL", styp: "ADD",
		render: func(sndr string, seqn int64, dttm time.Time) string {
			return envelope(sndr, seqn, dttm, "DLYL", "ADD", inner)
		},
	}
}

// schsItem is a seasonal-schedule download for one of the day's services: legal, sent
// upstream, not processed, so skipped (docs/sis-format.md).
func schsItem(at time.Time, day time.Time, f Flight) item {
	name, from, to := season(day)
	var b body
	b.open(1, "SCHS")
	b.leaf(2, "SNAM", name)
	b.leaf(2, "APCD", home)
	b.leaf(2, "SDAT", formatDate(from))
	b.leaf(2, "EDAT", formatDate(to))
	b.leaf(2, "RECS", "1")
	b.open(2, "FLTR")
	b.leaf(3, "ALCD", f.ALCD)
	b.leaf(3, "FLNO", f.FLNO)
	b.leaf(3, "MVIN", f.MVIN)
	b.leaf(3, "STDT", formatDate(from))
	b.leaf(3, "EDDT", formatDate(to))
	b.leaf(3, "DYOP", "1234567")
	b.leaf(3, "SCHT", f.SODT.In(airportZone).Format("1504"))
	b.leaf(3, "FLTY", f.FLTY)
	b.leaf(3, "FLIN", f.FLIN)
	for i, p := range routeTimes(f.MVIN, f.SODT, f.Route) {
		// Seasonal route times are HHmm (docs/sis-format.md).
		b.open(3, "ROUT", "RTNO", strconv.Itoa(i+1))
		b.leaf(4, "APCD", p.apcd)
		if !p.scat.IsZero() {
			b.leaf(4, "SCAT", p.scat.In(airportZone).Format("1504"))
		}
		if !p.scdt.IsZero() {
			b.leaf(4, "SCDT", p.scdt.In(airportZone).Format("1504"))
		}
		b.close(3, "ROUT")
	}
	b.leaf(3, "ACFT", f.ACFT)
	b.close(2, "FLTR")
	b.close(1, "SCHS")
	inner := b.String()
	return item{
		at: at, kind: KindUnsupported, want: Skipped, typ: "SCHS", styp: "DNLD",
		render: func(sndr string, seqn int64, dttm time.Time) string {
			return envelope(sndr, seqn, dttm, "SCHS", "DNLD", inner)
		},
	}
}

// season returns the IATA season containing day: summer from the last Sunday of March to the
// Saturday before the last Sunday of October, winter the rest.
func season(day time.Time) (name string, from, to time.Time) {
	y := day.Year()
	lastSunday := func(year int, m time.Month) time.Time {
		t := time.Date(year, m+1, 0, 0, 0, 0, 0, airportZone) // last day of m
		return t.AddDate(0, 0, -int(t.Weekday()))
	}
	summer, winter := lastSunday(y, time.March), lastSunday(y, time.October)
	switch {
	case day.Before(summer):
		return "Winter", lastSunday(y-1, time.October), summer.AddDate(0, 0, -1)
	case day.Before(winter):
		return "Summer", summer, winter.AddDate(0, 0, -1)
	default:
		return "Winter", winter, lastSunday(y+1, time.March).AddDate(0, 0, -1)
	}
}

// GLSTRESP is a GLST RESP carrying the gates, the answer to an RQRD of GLST.
func GLSTRESP(seqn int64, dttm time.Time, gates ...string) string {
	recs := make([]refRecord, len(gates))
	for i, g := range gates {
		recs[i] = refRecord{category: "GLST", fields: fields("GCOD", g, "GTNM", "Gate "+g, "GCAT", "D", "GTML", "T1")}
	}
	return envelope("AODB", seqn, dttm, "GLST", "RESP", refBody(recs...))
}

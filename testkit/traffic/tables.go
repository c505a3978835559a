package traffic

// Immutable lookup tables. The generator draws from them; nothing writes to them.
//
// The home airport is Chengdu Shuangliu (CTU) because every sample that shows a full route
// (SCHD-DNLD-SCHD-1, SCHS-DNLD-SCHS-1, FLOP-ERUT-ERUT-1) has CTU as the local station, so a
// generated day looks like the traffic the samples were cut from.

// home is the airport whose AODB sends the traffic; it never appears in ROUT (ROUT lists the
// other stations, as in the SCHD sample).
const home = "CTU"

// carrier is an airline that operates at the home airport.
type carrier struct {
	code    string
	weight  int    // relative share of the day's movements
	lo, hi  int    // flight-number range this carrier uses for CTU services
	based   bool   // home-based: its rotations start with a departure and come back
	foreign bool   // foreign carrier: international service to its hub, terminal T1
	hub     string // foreign carriers only: the one station they serve from CTU
	trml    string // terminal the carrier uses at CTU
	acft    []string
	reg     string // registration pattern: '#' a digit, '@' a capital letter
	agent   string // handling agent organisation id (ORGN OGID) for HNAG
}

// carriers is weighted towards the CTU-based airlines (Sichuan, Air China south-west, Chengdu
// Airlines, Tibet) as a real Shuangliu day is; the foreign share is a few per cent.
var carriers = []carrier{
	{code: "3U", weight: 30, lo: 8001, hi: 8999, based: true, trml: "T2", acft: []string{"319", "320", "321", "32N", "333", "359"}, reg: "B####", agent: "510001"},
	{code: "CA", weight: 18, lo: 4101, hi: 4599, based: true, trml: "T2", acft: []string{"319", "320", "321", "32N", "333", "789"}, reg: "B####", agent: "510002"},
	{code: "EU", weight: 8, lo: 2201, hi: 2799, based: true, trml: "T1", acft: []string{"320", "321", "32N"}, reg: "B####", agent: "510001"},
	{code: "TV", weight: 4, lo: 9801, hi: 9899, based: true, trml: "T1", acft: []string{"319", "320"}, reg: "B####", agent: "510001"},
	{code: "MU", weight: 12, lo: 5401, hi: 5999, trml: "T1", acft: []string{"320", "321", "738", "7M8"}, reg: "B####", agent: "510003"},
	{code: "CZ", weight: 10, lo: 3401, hi: 3999, trml: "T1", acft: []string{"320", "321", "32N", "738"}, reg: "B####", agent: "510003"},
	{code: "HU", weight: 4, lo: 7101, hi: 7999, trml: "T1", acft: []string{"738", "789"}, reg: "B####", agent: "510003"},
	{code: "ZH", weight: 3, lo: 9401, hi: 9899, trml: "T1", acft: []string{"320", "738"}, reg: "B####", agent: "510003"},
	{code: "MF", weight: 3, lo: 8401, hi: 8899, trml: "T1", acft: []string{"738", "7M8"}, reg: "B####", agent: "510003"},
	{code: "SC", weight: 2, lo: 4701, hi: 4999, trml: "T1", acft: []string{"738"}, reg: "B####", agent: "510003"},
	{code: "8L", weight: 2, lo: 9601, hi: 9999, trml: "T1", acft: []string{"738", "330"}, reg: "B####", agent: "510003"},
	{code: "GS", weight: 1, lo: 7501, hi: 7899, trml: "T1", acft: []string{"320", "E90"}, reg: "B####", agent: "510003"},
	{code: "G5", weight: 1, lo: 2601, hi: 2699, trml: "T1", acft: []string{"CR9"}, reg: "B####", agent: "510003"},
	{code: "CX", weight: 1, lo: 340, hi: 359, foreign: true, hub: "HKG", trml: "T1", acft: []string{"333", "359"}, reg: "B-L@@", agent: "510005"},
	{code: "SQ", weight: 1, lo: 830, hi: 849, foreign: true, hub: "SIN", trml: "T1", acft: []string{"359", "77W"}, reg: "9V-S@@", agent: "510005"},
	{code: "TG", weight: 1, lo: 610, hi: 629, foreign: true, hub: "BKK", trml: "T1", acft: []string{"333"}, reg: "HS-T@@", agent: "510005"},
	{code: "KE", weight: 1, lo: 470, hi: 499, foreign: true, hub: "ICN", trml: "T1", acft: []string{"333"}, reg: "HL7###", agent: "510005"},
	{code: "NH", weight: 1, lo: 920, hi: 939, foreign: true, hub: "NRT", trml: "T1", acft: []string{"788"}, reg: "JA8##A", agent: "510005"},
	{code: "QR", weight: 1, lo: 860, hi: 869, foreign: true, hub: "DOH", trml: "T1", acft: []string{"359"}, reg: "A7-A@@", agent: "510005"},
	{code: "KL", weight: 1, lo: 880, hi: 899, foreign: true, hub: "AMS", trml: "T1", acft: []string{"789"}, reg: "PH-B@@", agent: "510005"},
}

// domestic lists the Chinese stations a domestic route is drawn from.
var domestic = []string{
	"PEK", "PKX", "PVG", "SHA", "CAN", "SZX", "HGH", "XIY", "KMG", "WUH", "CSX", "NKG", "XMN",
	"HAK", "SYX", "TAO", "TSN", "SHE", "DLC", "HRB", "URC", "LXA", "LHW", "XNN", "KWE", "NNG",
	"TNA", "CGO", "HFE", "FOC", "TYN", "SJW", "INC", "JHG", "DYG", "KWL", "NGB", "WNZ", "CGQ",
	"HET", "YNT", "LJG",
}

// blockFromHome is a rough block time in minutes between CTU and a station; it only has to
// make route times (SCAT/SCDT) and turnarounds plausible.
var blockFromHome = map[string]int{
	"PEK": 170, "PKX": 175, "PVG": 175, "SHA": 170, "CAN": 140, "SZX": 145, "HGH": 155,
	"XIY": 85, "KMG": 80, "WUH": 110, "CSX": 105, "NKG": 145, "XMN": 160, "HAK": 150,
	"SYX": 165, "TAO": 170, "TSN": 165, "SHE": 210, "DLC": 195, "HRB": 240, "URC": 240,
	"LXA": 125, "LHW": 95, "XNN": 105, "KWE": 75, "NNG": 105, "TNA": 150, "CGO": 110,
	"HFE": 130, "FOC": 160, "TYN": 120, "SJW": 145, "INC": 110, "JHG": 75, "DYG": 95,
	"KWL": 100, "NGB": 160, "WNZ": 155, "CGQ": 225, "HET": 150, "YNT": 175, "LJG": 85,
	"HKG": 150, "SIN": 280, "BKK": 200, "ICN": 230, "NRT": 270, "DOH": 420, "AMS": 660,
}

// Chinese remark texts for REMC (R-FLOP-SCALAR: REMC is a free-text scalar; real AODB
// remarks at Chinese airports are in Chinese).
var (
	delayRemarks = []string{
		"航班延误",
		"因天气原因航班延误",
		"因航空管制航班延误",
		"因前序航班晚到延误",
		"因机械故障航班延误",
		"因航班计划调整延误",
	}
	cancelRemarks = []string{
		"航班取消",
		"因天气原因航班取消",
		"因航空公司计划航班取消",
	}
	undoRemarks = []string{
		"航班恢复执行",
		"取消已撤销，航班正常执行",
	}
	infoRemarks = []string{
		"旅客正在登机",
		"请旅客留意登机口变更",
		"行李延迟到达",
		"VIP旅客随机",
	}
)

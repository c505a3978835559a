package ctl

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The commands stay generated from the descriptor; what a person reads is written here, one
// entry per RPC. An RPC added to control.proto is reachable at once with generated help, and
// TestEveryCommandIsDocumented fails until its entry (a short line, examples, the help of each
// flag) is added below: adding an RPC's help is one entry in commandDocs.

// commandDoc is the written help of one RPC's command.
type commandDoc struct {
	// Short is the one line of the command list, in operator words.
	Short string
	// Long explains what the command does and when to use it; the token it needs is added.
	Long string
	// Example is cobra's Examples section: one command line per example, each with a comment
	// line before it. TestExamplesParse runs each through the command tree.
	Example string
	// Args are the request fields (proto names) taken as positional arguments, in order; a
	// repeated field last takes every remaining argument.
	Args []string
	// Flags is the help of the request's fields, by proto path (range.first); fields not here
	// use sharedFlagDocs.
	Flags map[string]string
	// Name is the response field -o name prints (a repeated field: one line per entry); empty:
	// the rows of the response's first repeated message field, by their first field.
	Name string
}

// sharedFlagDocs is the help of fields that mean the same in every request.
var sharedFlagDocs = map[string]string{
	"dry_run":      "show what would be done and change nothing",
	"comment":      "why you do this (a ticket, an incident): written to the audit log; required for a change unless the server sets control.require-comment=false (a dry run needs none)",
	"page_size":    "how many to return per page (default 100, at most 1000); pages the server ends at control.page-bytes are followed until there are this many",
	"page_token":   "continue after the previous page: the next page token it printed (or use --all)",
	"range.first":  "only inbox IDs from this one (with --range.last: an inclusive range)",
	"range.last":   "only inbox IDs up to this one",
	"msg_id":       "the inbox message ID (CMINMSGS_ID)",
	"msg_ids":      "these inbox message IDs",
	"flid":         "the flight ID (FLID)",
	"rebuild_id":   "the rebuild's ID (list-projection-rebuilds shows them)",
	"rtype":        "the reference category, e.g. GLST",
	"rtyp":         "the resource type: BELT, CNTR, GATE or STND",
	"error_class":  "only messages of this error class",
	"target":       "the outbox target: KAFKA:msg or KAFKA:schd",
	"limit":        "at most this many",
	"after_msg_id": "continue after this message ID: the --after-msg-id the previous page printed (or use --all)",
}

var commandDocs = map[protoreflect.Name]commandDoc{
	"GetStatus": {
		Short: "Show the pipeline at a glance: roles, discovery, backlog, outbox",
		Long: "Shows who holds each role and what blocks it, the discovery watermark and its lag behind\n" +
			"the inbox, holes, the backlog and its drain estimate, counts by state and error class,\n" +
			"backfill progress and the outbox per target. --watch redraws it in place.",
		Example: "# The pipeline now\nmsgxctl get-status\n" +
			"# Watch it drain, redrawn every 2 seconds\nmsgxctl get-status --watch --interval 2s\n" +
			"# For a script\nmsgxctl get-status -o json",
	},
	"GetMessage": {
		Short: "Show one message: its timeline, attempts, raw XML and events",
		Long: "Shows one inbox message's life (in the inbox, enqueued, processing started, finished,\n" +
			"marked, each event sent), every attempt with its error, its trace, its raw XML and the\n" +
			"outbox events it wrote.",
		Example: "# One message\nmsgxctl get-message 123456\n" +
			"# Everything, exactly, for a ticket\nmsgxctl get-message 123456 -o yaml",
		Args: []string{"msg_id"},
	},
	"GetMessageBody": {
		Short: "Print a message's raw XML a chunk at a time, for a text get-message truncates",
		Long: "get-message shows at most control.max-body-chars characters of the raw XML. This prints\n" +
			"the text from --offset, at most --limit characters (the server's bound when 0), exactly and\n" +
			"nothing else on stdout; the offset of the next chunk goes to stderr (-o wide or json show\n" +
			"offsets, length and source with the text).",
		Example: "# The first chunk: the XML alone, to redirect to a file\nmsgxctl get-message-body 123456\n" +
			"# The next one, from the offset stderr printed (append it to the file)\nmsgxctl get-message-body 123456 --offset 262144",
		Args: []string{"msg_id"},
		Flags: map[string]string{
			"offset": "the first character to print, from 0",
			"limit":  "at most this many characters (0: the server's control.max-body-chars)",
		},
	},
	"ListMessages": {
		Short: "List messages by state, error class, flight or time, a page at a time",
		Long: "Lists processing records in inbox ID order. Filters combine: a message must match all\n" +
			"of them. --all follows the pages to the end.",
		Example: "# The messages that need an operator\nmsgxctl list-messages --state dead\n" +
			"# Dead or failed for lack of a dependency, every page\nmsgxctl list-messages --state dead,failed --error-class infra,exhausted --all\n" +
			"# Messages about one flight since 06:00 UTC\nmsgxctl list-messages --flid 2718281 --enqueued-from 2026-03-01T06:00:00Z\n" +
			"# By flight number and operation day\nmsgxctl list-messages --flight-number CA1501 --operation-day 2026-03-01\n" +
			"# Only the IDs, for another command\nmsgxctl list-messages --state dead -o name",
		Flags: map[string]string{
			"states":        "only messages in these states",
			"error_classes": "only messages with these error classes",
			"abandoned":     "only messages whose processed marker was given up on (see reopen)",
			"flid":          "only messages about this flight ID (FLID)",
			"flight_number": "only messages about this flight number, e.g. CA1501 (with --operation-day)",
			"operation_day": "the operation day of --flight-number, YYYY-MM-DD (airport time)",
			"enqueued_from": "only messages enqueued at or after this time",
			"enqueued_to":   "only messages enqueued before this time",
			"acknowledged":  "only DEAD messages an operator acknowledged, or only those nobody did (acknowledge-dead)",
		},
	},
	"Replay": {
		Short: "Process failed or dead messages again",
		Long: "Puts FAILED and DEAD messages of a replayable error class (codec-error, unsupported, infra,\n" +
			"exhausted), and SKIPPED(UNSUPPORTED) ones, back to PENDING with their attempts reset.\n" +
			"MALFORMED messages are never replayed. Give at least one selector: IDs, --error-class or a\n" +
			"range; with several, a message must match all. Run it with --dry-run first.",
		Example: "# What an outage left behind, first as a dry run\nmsgxctl replay --error-class exhausted --range.first 120000 --range.last 125000 --dry-run\n" +
			"# Then for real, naming the incident\nmsgxctl replay --error-class exhausted --range.first 120000 --range.last 125000 --comment \"INC-2291 redis outage\"\n" +
			"# Two messages after a codec fix\nmsgxctl replay 123456 123470 --comment \"codec fix 1.4.2\"",
		Args:  []string{"msg_ids"},
		Flags: map[string]string{"msg_ids": "replay these inbox message IDs"},
		Name:  "replayed_ids",
	},
	"Reopen": {
		Short: "Give abandoned processed markers one more try",
		Long: "Reopens backfill rows whose processed marker was abandoned (the inbox row was missing, or\n" +
			"writing it failed for too long) for one immediate try. Only abandoned rows are reopened;\n" +
			"for a named message that is not, msgxctl says what state it is in.",
		Example: "# One message\nmsgxctl reopen 123456 --comment INC-7\n" +
			"# Every row abandoned because the inbox row was missing, as a dry run\nmsgxctl reopen --reason missing-row --dry-run",
		Args: []string{"msg_ids"},
		Flags: map[string]string{
			"msg_ids": "reopen these abandoned inbox message IDs",
			"reason":  "reopen the rows abandoned for this reason",
		},
		Name: "reopened_ids",
	},
	"SeedCutover": {
		Short: "Set where discovery starts on a fresh system (once)",
		Long: "Sets the discovery watermark W of a fresh system: min (the oldest inbox row is the first\n" +
			"read), zero (every ID from 1), max (only rows newer than now) or id (rows above\n" +
			"--watermark). Refused once the cursor is seeded or has moved, or once messages exist.",
		Example: "# Start with the rows that arrive from now on\nmsgxctl seed-cutover --mode max --comment \"cutover plan v3\"\n" +
			"# Start above a known ID\nmsgxctl seed-cutover --mode id --watermark 4100000",
		Flags: map[string]string{
			"mode":      "where discovery starts",
			"watermark": "with --mode id: rows with a larger ID are read",
		},
	},
	"RequeueEvents": {
		Short: "Send dead outbox events (dead letters) again",
		Long: "Puts DEAD outbox events back to PENDING with their attempts reset. A dead KAFKA:msg event\n" +
			"holds its flight's later events back until it is requeued. Give event IDs or --target;\n" +
			"--flid and --msg-id narrow the selection. --dry-run lists the dead letters it matches.",
		Example: "# Review the dead letters of one target\nmsgxctl requeue-events --target KAFKA:msg --dry-run\n" +
			"# Requeue one flight's\nmsgxctl requeue-events --target KAFKA:msg --flid 2718281 --comment INC-12\n" +
			"# Requeue named events\nmsgxctl requeue-events 9001 9002 --comment INC-12",
		Args: []string{"event_ids"},
		Flags: map[string]string{
			"event_ids": "requeue these event IDs",
			"target":    "requeue the dead events of this target: KAFKA:msg or KAFKA:schd",
			"flid":      "only the events of this flight ID (the Kafka key)",
			"msg_id":    "only the events this inbox message wrote",
			"limit":     "at most this many events per call (default and maximum 1000)",
		},
		Name: "events",
	},
	"ResolveContractViolation": {
		Short: "Resolve the upstream contract violation that stopped discovery",
		Long: "The way out of a contract violation that stopped discovery (get-status shows it; see the\n" +
			"runbook in docs/runbooks.md). resume clears it and discovery goes on, processing again the\n" +
			"rows a restored database had lost: after a restore it is refused until msgx-dispatcher\n" +
			"version-floor has run, so that no version goes out below what consumers hold. skip-marked\n" +
			"moves the watermark over the marked rows without processing them again, which leaves the\n" +
			"flights at the backup's state and rewinds consumers: it is refused without --force. Run it\n" +
			"with --dry-run first and pass its --since.",
		Example: "# What resuming would do\nmsgxctl resolve-contract-violation --kind inbox-behind-watermark --resolution resume --dry-run\n" +
			"# After a restore and msgx-dispatcher version-floor: process the lost rows again\nmsgxctl resolve-contract-violation --kind marked-above-watermark --resolution resume --since 2026-03-01T06:00:00Z --comment INC-31\n" +
			"# Skip them, knowingly leaving the flights at the backup's state\nmsgxctl resolve-contract-violation --kind marked-above-watermark --resolution skip-marked --force --since 2026-03-01T06:00:00Z --comment INC-31",
		Flags: map[string]string{
			"kind":       "the standing violation: inbox-behind-watermark or marked-above-watermark",
			"resolution": "how to resolve it",
			"through":    "with skip-marked: the last inbox ID that may be skipped (0: the whole run of marked rows)",
			"since":      "refuse unless the standing violation began at this time (from get-status or a dry run)",
			"force":      "do what would rewind consumers (skip-marked; resume before the version floor): audited",
		},
	},
	"GetReference": {
		Short: "Show one reference data record",
		Example: "# Gate G3\nmsgxctl get-reference GLST G3\n" +
			"# The same with flags\nmsgxctl get-reference --category GLST --record-key G3 -o json",
		Args: []string{"rtype", "rkey"},
		Flags: map[string]string{
			"rkey": "the record's key (the value of the category's key tag, e.g. the GCOD of a gate)",
		},
	},
	"ListReference": {
		Short: "List one category's reference data records, a page at a time",
		Example: "# Every gate\nmsgxctl list-reference GLST --all\n" +
			"# Airlines, 50 per page\nmsgxctl list-reference AIRL --page-size 50",
		Args: []string{"rtype"},
	},
	"GetResourceStatus": {
		Short: "Show whether a gate, stand, belt or counter is available at a time",
		Example: "# Gate G17 now\nmsgxctl get-resource-status GATE G17\n" +
			"# At a given time\nmsgxctl get-resource-status GATE G17 --at 2026-03-01T11:00:00+08:00",
		Args: []string{"rtyp", "rsid"},
		Flags: map[string]string{
			"rsid": "the resource's ID, e.g. G17",
			"at":   "the time asked about (default: now)",
		},
	},
	"RequestSchedule": {
		Short: "Ask AODB for the schedule of some operation days (RQFD)",
		Example: "# Two days, as a dry run\nmsgxctl request-schedule --from-day 2026-03-01 --to-day 2026-03-02 --dry-run\n" +
			"# For real\nmsgxctl request-schedule --from-day 2026-03-01 --to-day 2026-03-02 --comment INC-40",
		Flags: map[string]string{
			"from_day": "the first operation day, YYYY-MM-DD (airport time)",
			"to_day":   "the last operation day, YYYY-MM-DD (at most 7 days after --from-day)",
		},
		Name: "request.req_id",
	},
	"RequestReference": {
		Short: "Ask AODB for one reference category or resource status (RQRD)",
		Example: "# All gates\nmsgxctl request-reference GLST --comment INC-41\n" +
			"# The status of every gate\nmsgxctl request-reference RSTA GATE --dry-run",
		Args: []string{"category", "rtyp"},
		Flags: map[string]string{
			"category": "the reference category, or RSTA for resource status",
			"rtyp":     "with RSTA: the resource type, BELT, CNTR, GATE or STND",
		},
		Name: "request.req_id",
	},
	"ListRequests": {
		Short: "List the requests sent to AODB and their answers",
		Example: "# Requests still waiting for an answer\nmsgxctl list-requests --state sent\n" +
			"# Every schedule request, with the XML sent\nmsgxctl list-requests --type rqfd --all -o wide",
		Flags: map[string]string{
			"state": "only requests in this state",
			"type":  "only requests of this type",
		},
	},
	"RebuildProjection": {
		Short: "Compare the Redis projection with PostgreSQL and repair it",
		Long: "Compares the Redis projection of every flight (--all) or of some flights with PostgreSQL,\n" +
			"rewrites what drifted and removes keys of flights PostgreSQL does not have; --dry-run only\n" +
			"counts the drift. msgxctl follows the rebuild until it ends (--detach returns at once).\n" +
			"A --all repair that repaired all it found resets the drift streak MsgxProjectionDrift\n" +
			"fires on; a dry run or a repair of some flights leaves it.",
		Example: "# Count the drift, changing nothing\nmsgxctl rebuild-projection --all --dry-run\n" +
			"# Repair two flights\nmsgxctl rebuild-projection 2718281 2718282 --comment INC-16\n" +
			"# Start a full repair and return\nmsgxctl rebuild-projection --all --detach --comment INC-16",
		Args: []string{"flid"},
		Flags: map[string]string{
			"all":  "every flight, and a scan of Redis for keys PostgreSQL does not have",
			"flid": "only these flight IDs (at most 10000)",
		},
		Name: "rebuild.rebuild_id",
	},
	"GetProjectionRebuild": {
		Short:   "Show one projection rebuild and its progress",
		Example: "# Rebuild 7\nmsgxctl get-projection-rebuild 7",
		Args:    []string{"rebuild_id"},
	},
	"ListProjectionRebuilds": {
		Short:   "List projection rebuilds, newest first",
		Example: "# The latest rebuilds\nmsgxctl list-projection-rebuilds\n# Every one\nmsgxctl list-projection-rebuilds --all -o json",
		Flags:   map[string]string{"page_size": "how many to return per page (default 100, at most 1000)"},
	},
	"CancelProjectionRebuild": {
		Short: "Stop a projection rebuild (what it repaired stays repaired)",
		Long: "Stops a rebuild: a pending one at once, a running one after the page it is on; what it\n" +
			"repaired stays repaired. The rebuild keeps who cancelled it and --comment (cancelled_by,\n" +
			"cancel_comment). --dry-run shows the rebuild as the cancel would leave it.",
		Example: "# What stopping rebuild 7 would do\nmsgxctl cancel-projection-rebuild 7 --dry-run\n" +
			"# Stop rebuild 7\nmsgxctl cancel-projection-rebuild 7 --comment \"peak hour\"",
		Args:  []string{"rebuild_id"},
		Flags: map[string]string{"rebuild_id": "the rebuild to stop (list-projection-rebuilds shows them)"},
	},
	"Republish": {
		Short: "Send the current state of all flights, or of some, to KAFKA:schd again",
		Long: "For a topic that was lost or a consumer that needs a full reload: the backfill writes\n" +
			"every flight's (or the listed flights') current document, at its current STATE_VERSION,\n" +
			"through the outbox; consumers see each record as the newest or as a duplicate. One runs\n" +
			"at a time; it resumes after a restart, and running it twice only sends duplicates.\n" +
			"msgxctl follows its progress until it ends.\n\n" +
			"--dry-run shows what would be requested (the flights it would send, the FLIDs the current\n" +
			"state does not hold, or the republish already open) and requests nothing. --all first\n" +
			"shows that preview and asks for \"yes\" on the terminal; --yes skips the question (for\n" +
			"scripts). Without a terminal on stdin and without --yes it requests nothing (exit 2).",
		Example: "# What a full republish would send\nmsgxctl republish --all --dry-run\n" +
			"# After the schd topic was recreated empty (asks for yes first)\nmsgxctl republish --all --comment INC-42\n" +
			"# The same from a script\nmsgxctl republish --all --yes --comment INC-42 --detach\n" +
			"# Two flights a consumer lost\nmsgxctl republish 2718281 2718282 --comment INC-43",
		Args: []string{"flid"},
		Flags: map[string]string{
			"all":  "every flight (active ones as documents, deleted ones as tombstones)",
			"flid": "only these flight IDs (at most 10000)",
		},
		Name: "republish.republish_id",
	},
	"GetRepublish": {
		Short:   "Show one republish and its progress",
		Example: "# Republish 3\nmsgxctl get-republish 3",
		Args:    []string{"republish_id"},
		Flags:   map[string]string{"republish_id": "the republish's ID (list-republishes shows them)"},
	},
	"ListRepublishes": {
		Short:   "List republishes, newest first",
		Example: "# The latest republishes\nmsgxctl list-republishes\n# Every one\nmsgxctl list-republishes --all -o json",
	},
	"CancelRepublish": {
		Short: "Stop a republish (what it sent stays sent)",
		Long: "Stops a republish: a pending one at once, a running one after the page it is on; what it\n" +
			"wrote until then is still sent. The republish keeps who cancelled it and --comment\n" +
			"(cancelled_by, cancel_comment). --dry-run shows the republish as the cancel would leave it.",
		Example: "# What stopping republish 3 would do\nmsgxctl cancel-republish 3 --dry-run\n" +
			"# Stop republish 3\nmsgxctl cancel-republish 3 --comment \"peak hour\"",
		Args:  []string{"republish_id"},
		Flags: map[string]string{"republish_id": "the republish to stop (list-republishes shows them)"},
	},
	"AcknowledgeDead": {
		Short: "Record that DEAD messages were reviewed and need nothing more",
		Long: "For DEAD messages that replay must refuse (MALFORMED, PROTOCOL) or that an operator\n" +
			"decided to leave: records who reviewed them and why. The DEAD gauge and MsgxMessagesDead\n" +
			"count only unacknowledged messages; acknowledged ones stay listed (list-messages\n" +
			"--acknowledged acknowledged). A replay clears the acknowledgement. --dry-run lists the\n" +
			"messages it would acknowledge and changes nothing.",
		Example: "# Which DEAD protocol errors an acknowledgement would take\nmsgxctl acknowledge-dead --error-class protocol --reason INC-8 --dry-run\n" +
			"# Two malformed messages, reviewed\nmsgxctl acknowledge-dead 123 124 --reason \"INC-7: AODB sent truncated XML\"\n" +
			"# Every DEAD message of a class\nmsgxctl acknowledge-dead --error-class protocol --reason \"INC-8: unknown subtype, no action\"",
		Args: []string{"msg_ids"},
		Flags: map[string]string{
			"error_class": "every DEAD message of this error class (instead of IDs)",
			"reason":      "why they need nothing more: kept with each message and written to the audit log",
		},
		Name: "acknowledged_ids",
	},
	"GetFlight": {
		Short: "Show one flight in PostgreSQL next to its Redis projection",
		Long: "A diff: the fields where the two differ, side by side and marked ≠, a long value cut to\n" +
			"48 characters and followed by where the two sides part, and how many fields agree;\n" +
			"-o wide prints every field side by side, whole.",
		Example: "# A flight and its drift\nmsgxctl get-flight 2718281\n" +
			"# With its 50 newest messages and events\nmsgxctl get-flight 2718281 --limit 50\n" +
			"# Every value whole\nmsgxctl get-flight 2718281 -o wide",
		Args:  []string{"flid"},
		Flags: map[string]string{"limit": "how many of its newest messages and events (default 20, at most 200)"},
	},
	"GetFlightHistory": {
		Short: "Show why a flight looks as it does: every message that changed it",
		Example: "# The history of a flight\nmsgxctl flight-history 2718281\n" +
			"# Every page, as JSON\nmsgxctl flight-history 2718281 --all -o json",
		Args:  []string{"flid"},
		Flags: map[string]string{"page_size": "entries per page (default 50, at most 500); pages the server ends at control.page-bytes are followed until there are this many"},
	},
}

// flagNames respells fields whose proto names differ between requests or are abbreviations,
// so that one thing has one flag everywhere; the proto spelling stays accepted, hidden.
var flagNames = map[string]string{
	"rtype":         "category",
	"rtyp":          "resource-type",
	"rsid":          "resource-id",
	"rkey":          "record-key",
	"states":        "state",
	"error_classes": "error-class",
	"msg_ids":       "msg-id",
	"event_ids":     "event-id",
}

// valueChoices are the values a string field takes, for completion and help.
var valueChoices = map[string][]string{
	"target":   {controlv1.TargetKafkaMsg, controlv1.TargetKafkaSchd},
	"rtype":    controlv1.ReferenceCategories,
	"category": append(append([]string(nil), controlv1.ReferenceCategories...), "RSTA"),
	"rtyp":     controlv1.ResourceTypes,
	"kind":     {"inbox-behind-watermark", "marked-above-watermark"},
}

// docOf is the written help of an RPC and whether it has one.
func docOf(md protoreflect.MethodDescriptor) (commandDoc, bool) {
	d, ok := commandDocs[md.Name()]
	return d, ok
}

// flagDoc is the written help of a request field by its proto path, and whether there is one.
func flagDoc(d commandDoc, path string) (string, bool) {
	if s, ok := d.Flags[path]; ok {
		return s, true
	}
	if s, ok := sharedFlagDocs[path]; ok {
		return s, true
	}
	return "", false
}

// words is a field name for a person when no help is written: page_size → "page size".
func words(path string) string {
	return strings.NewReplacer("_", " ", ".", " ").Replace(path)
}

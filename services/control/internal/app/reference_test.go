package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/reference"
	"github.com/msgexchange/msgexchange/pkg/refstore"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestReferenceReads(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2024, 3, 15, 4, 0, 0, 0, time.UTC) // 12:00 airport time
	at := func(hh int) time.Time { return time.Date(2024, 3, 15, hh, 0, 0, 0, time.FixedZone("CST", 8*3600)) }
	ctx := t.Context()
	if err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
		var recs []refstore.Record
		for _, k := range []string{"G1", "G2", "G3", "G4", "G5"} {
			recs = append(recs, refstore.Record{RKey: k, Payload: map[string]any{"GCOD": k, "GNMC": k + "号门"}})
		}
		src := refstore.Source{MsgID: 9, Batch: "AODB|GLST|DNLD|9", At: now.Add(-time.Hour)}
		if _, err := refstore.Replace(ctx, tx, "GLST", recs, src); err != nil {
			return err
		}
		if err := refstore.Advance(ctx, tx, "GLST", "DNLD", src, true, len(recs)); err != nil {
			return err
		}
		if _, err := refstore.Replace(ctx, tx, "CHLT", []refstore.Record{{RKey: "G1", Payload: map[string]any{"CCOD": "G1"}}}, src); err != nil {
			return err
		}
		end := at(18)
		return refstore.AddEvents(ctx, tx, []reference.Event{{RTYP: "GATE", RSID: "G17", STAT: "D", From: at(10), End: &end,
			STRT: "15MAR241000", ENDT: "15MAR241800", MsgID: 10, Ordinal: 1}}, "AODB|RSTA|DNLD|10", now)
	}); err != nil {
		t.Fatal(err)
	}
	in := startControl(t, d, "control-ref", token, false, now)
	cctx := withToken(callCtx(t), token)

	t.Run("get reference", func(t *testing.T) {
		got, err := in.client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "GLST", Rkey: "G2"})
		if err != nil {
			t.Fatal(err)
		}
		r := got.GetReference()
		var payload map[string]any
		if err := json.Unmarshal([]byte(r.GetPayloadJson()), &payload); err != nil || payload["GNMC"] != "G2号门" {
			t.Errorf("payload %s, %v", r.GetPayloadJson(), err)
		}
		if r.GetSourceMsgId() != 9 || r.GetBatch() != "AODB|GLST|DNLD|9" || !r.GetRefreshedAt().AsTime().Equal(now.Add(-time.Hour)) ||
			r.GetCategoryPublishedAt() == nil {
			t.Errorf("reference = %v", r)
		}
		if _, err := in.client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "CLST", Rkey: "G1"}); status.Code(err) != codes.NotFound {
			t.Errorf("CLST G1 (only CHLT has it): %v, want NotFound", err)
		}
		if _, err := in.client.GetReference(cctx, &controlv1.GetReferenceRequest{Rtype: "DLYL", Rkey: "G1"}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("DLYL: %v, want InvalidArgument", err)
		}
	})
	t.Run("list reference in pages", func(t *testing.T) {
		var keys []string
		tok := ""
		for pages := 1; ; pages++ {
			resp, err := in.client.ListReference(cctx, &controlv1.ListReferenceRequest{Rtype: "GLST", PageSize: 2, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.GetReferences() {
				keys = append(keys, r.GetRkey())
			}
			if tok = resp.GetNextPageToken(); tok == "" || pages > 5 {
				break
			}
			if _, err := in.client.ListReference(cctx, &controlv1.ListReferenceRequest{Rtype: "CHLT", PageToken: tok}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("a GLST token for CHLT: %v, want InvalidArgument", err)
			}
		}
		if strings.Join(keys, ",") != "G1,G2,G3,G4,G5" {
			t.Errorf("keys = %v", keys)
		}
	})
	t.Run("resource status before, inside and after the window", func(t *testing.T) {
		for _, tc := range []struct {
			at        *timestamppb.Timestamp
			available bool
		}{
			{timestamppb.New(at(9)), true},
			{nil, false}, // the control instance's clock: 12:00, inside
			{timestamppb.New(at(18)), true},
		} {
			got, err := in.client.GetResourceStatus(cctx, &controlv1.GetResourceStatusRequest{Rtyp: "GATE", Rsid: "G17", At: tc.at})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetAvailable() != tc.available || !got.GetKnown() {
				t.Errorf("at %v: %v, want available=%v", tc.at, got, tc.available)
			}
			if tc.at == nil && (!got.GetAt().AsTime().Equal(now) || got.GetGoverning().GetSourceMsgId() != 10 ||
				!got.GetGoverning().GetEndsAt().AsTime().Equal(at(18)) || got.GetGoverning().GetStat() != "D") {
				t.Errorf("at now: %v", got)
			}
		}
		got, err := in.client.GetResourceStatus(cctx, &controlv1.GetResourceStatusRequest{Rtyp: "BELT", Rsid: "B1"})
		if err != nil || !got.GetAvailable() || got.GetKnown() || got.GetGoverning() != nil {
			t.Errorf("an unknown belt: %v, %v; want available by default", got, err)
		}
	})
	t.Run("msgxctl", func(t *testing.T) {
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}
		out, errOut, code := msgxctl(t, env, "get-reference", "--rtype", "GLST", "--rkey", "G3", "-o", "json")
		if code != 0 || !strings.Contains(out, `G3号门`) {
			t.Errorf("get-reference: exit %d %s\n%s", code, errOut, out)
		}
		out, errOut, code = msgxctl(t, env, "get-resource-status", "--rtyp", "GATE", "--rsid", "G17", "--at", "2024-03-15T11:00:00+08:00", "-o", "json")
		if code != 0 || !strings.Contains(out, `"known": true`) || strings.Contains(out, `"available": true`) {
			t.Errorf("get-resource-status: exit %d %s\n%s", code, errOut, out)
		}
		// The old spellings above still work, hidden; the subjects are arguments, in one spelling.
		byFlags := out
		out, errOut, code = msgxctl(t, env, "get-resource-status", "GATE", "G17", "--at", "2024-03-15T11:00:00+08:00", "-o", "json")
		if code != 0 || out != byFlags {
			t.Errorf("get-resource-status GATE G17: exit %d %s\n%s", code, errOut, out)
		}
		out, errOut, code = msgxctl(t, env, "get-reference", "GLST", "G3")
		if code != 0 || !regexp.MustCompile(`reference.rkey\s+G3\n`).MatchString(out) {
			t.Errorf("get-reference GLST G3: exit %d %s\n%s", code, errOut, out)
		}
		out, _, _ = msgxctl(t, env, "get-reference", "--help")
		if !strings.Contains(out, "--category") || !strings.Contains(out, "--record-key") || strings.Contains(out, "--rtype") {
			t.Errorf("get-reference --help does not show one spelling:\n%s", out)
		}
	})
}

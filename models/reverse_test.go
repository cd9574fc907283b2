package models_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"studio/models"
)

func TestCheckReverseParam(t *testing.T) {
	if err := models.CheckReverseParam("image_url", "image_url"); err != nil {
		t.Fatal(err)
	}
	if err := models.CheckReverseParam("file", "file"); err != nil {
		t.Fatal(err)
	}
	for _, p := range models.ReverseRemovedParams {
		err := models.CheckReverseParam(p, "image_url")
		if models.KindOf(err) != models.KindInvalid || !strings.Contains(err.Error(), "2026-08-16") {
			t.Errorf("%s: %v, want 400 naming the removal", p, err)
		}
	}
	for _, c := range []struct{ name, input, msg string }{
		{"file", "image_url", "exactly one"},
		{"image_url", "file", "exactly one"},
		{"image_url", "", "exactly one"},
		{"lang", "image_url", "no other parameters"},
	} {
		if err := models.CheckReverseParam(c.name, c.input); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s with input %q: %v, want %q", c.name, c.input, err, c.msg)
		}
	}
}

func TestParseReadingHasExactlyTheSpecFields(t *testing.T) {
	answer := "```json\n" + `{"sculpt":{"Subject":"a fox","composition":"centred","universe":"forest","light":"dusk","print":"photo","texture":"fur","extra":"x"},
		"prompt":"a red fox","prompt_cn":"一只红狐狸","style_tags":"photo, wildlife, photo","ratio":"3:4","zh_name":"狐狸","description":"A fox.",
		"genre":"wildlife","body_md":"## Fox","confidence":0.9}` + "\n```"
	r, err := models.ParseReading(answer)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sculpt.Subject != "a fox" || r.AspectRatio != "3:4" || r.Ratio != "3:4" || !slices.Equal(r.StyleTags, []string{"photo", "wildlife"}) {
		t.Fatalf("reading = %+v", r)
	}
	data, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// The answer's "ok" is added by the REST surface (rest: TestReverseAnswersExactlyTheFieldsOfTheSpec).
	want := []string{"aspect_ratio", "body_md", "description", "genre", "prompt", "prompt_cn", "ratio", "sculpt", "style_tags", "zh_name"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	if sparse, err := models.ParseReading(`{"sculpt":{},"prompt":"p"}`); err != nil || sparse.StyleTags == nil {
		t.Fatalf("a sparse reading = %+v, %v; want empty fields and an empty style_tags array", sparse, err)
	}
	for _, bad := range []string{"", "nothing", `{"prompt":"p"}`, `{"sculpt":"x","prompt":"p"}`, `{"sculpt":{}}`, `{"title":"t","body":"b"}`} {
		if _, err := models.ParseReading(bad); err == nil {
			t.Errorf("ParseReading(%q) accepted an unusable answer", bad)
		}
	}
}

func TestReverseChargeIsRefundedOnce(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(2))})
	dedicated := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(1))})
	user := newUser(t, app, 1)
	for _, id := range []*models.Identity{tenant, dedicated, user} {
		rc, err := app.Copy().ChargeReverse(ctx, id)
		if err != nil {
			t.Fatalf("%s: charge: %v", id.Kind, err)
		}
		if _, err := app.Copy().ChargeReverse(ctx, id); id != tenant && models.KindOf(err) != models.KindInsufficientCredits {
			t.Fatalf("%s: a second reading with no credit left: %v", id.Kind, err)
		}
		first, err := app.Copy().RefundReverse(ctx, rc)
		if err != nil || !first {
			t.Fatalf("%s: refund = %v, %v", id.Kind, first, err)
		}
		again, err := app.Copy().RefundReverse(ctx, rc)
		if err != nil || again {
			t.Fatalf("%s: second refund = %v, %v; want no refund", id.Kind, again, err)
		}
	}
	if problems, err := app.Credits().AuditLedger(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("ledger audit: %v %v", problems, err)
	}
	var n int64
	app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ? AND ref LIKE ?", models.LedgerRefund, "reverse:%").Count(&n)
	if n < 3 {
		t.Fatalf("%d refund rows, want at least one per reading", n)
	}
}

package models_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"studio/models"
	"studio/models/modelstest"
)

func recordTx(t *testing.T, app *models.App, tenantID, service, agent string) {
	t.Helper()
	if err := app.Tx(context.Background(), func(tx *gorm.DB) error {
		return app.Credits().RecordUsageTx(tx, tenantID, service, agent)
	}); err != nil {
		t.Fatal(err)
	}
}

func usage(t *testing.T, app *models.App, tenantID string, days int) *models.UsageView {
	t.Helper()
	v, err := app.Accounts().TenantUsage(context.Background(), modelstest.Tenant(tenantID), days)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUsageDayBoundaryIsLocalMidnight(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{})
	now := time.Date(2026, 11, 21, 15, 59, 0, 0, time.UTC) // 23:59 on 21 November in Shanghai
	app.Now = func() time.Time { return now }
	recordTx(t, app, tenant.TenantID, models.ServiceImage, "")
	now = now.Add(2 * time.Minute) // 00:01 on 22 November in Shanghai, still 21 November in UTC
	recordTx(t, app, tenant.TenantID, models.ServiceImage, "")
	v := usage(t, app, tenant.TenantID, 2)
	if v.Days != 2 || len(v.Daily) != 2 || v.Timezone != "Asia/Shanghai" {
		t.Fatalf("usage = %+v", v)
	}
	if want := time.Date(2026, 11, 20, 16, 0, 0, 0, time.UTC); !v.Since.Equal(want) {
		t.Errorf("since = %s, want %s", v.Since, want)
	}
	for i, want := range []string{"2026-11-21", "2026-11-22"} {
		if d := v.Daily[i]; d.Date != want || d.Image != 1 || d.Total != 1 {
			t.Errorf("daily[%d] = %+v, want %s with one image", i, d, want)
		}
	}
	if v.Totals.Image != 2 || v.Totals.Total != 2 {
		t.Errorf("totals = %+v", v.Totals)
	}
}

func TestUsageColumnsAndAgents(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{})
	other := newTenant(t, app, models.TenantInput{Name: "Other"})
	for _, s := range []struct{ service, agent string }{
		{models.ServiceImage, ""}, {models.ServiceImage, "writer"}, {models.ServiceVideo, ""},
		{models.ServiceChat, "writer"}, {models.ServiceCopy, ""}, {models.ServiceReverse, ""},
		{models.ServiceImageToTemplate, ""}, {"hologram", ""}, {" IMAGE ", ""},
	} {
		recordTx(t, app, tenant.TenantID, s.service, s.agent)
	}
	recordTx(t, app, other.TenantID, models.ServiceImage, "")
	recordTx(t, app, "", models.ServiceImage, "") // a personal login has no tenant usage
	v := usage(t, app, tenant.TenantID, 0)
	if v.Days != models.UsageDefaultDays || len(v.Daily) != models.UsageDefaultDays {
		t.Fatalf("days = %d with %d rows, want 30", v.Days, len(v.Daily))
	}
	want := models.UsageCounts{Image: 3, Video: 1, Chat: 2, Reverse: 1, Other: 2, Total: 9}
	if today := v.Daily[len(v.Daily)-1]; today.UsageCounts != want {
		t.Errorf("today = %+v, want %+v", today.UsageCounts, want)
	}
	if v.Totals != want {
		t.Errorf("totals = %+v, want %+v", v.Totals, want)
	}
	for _, d := range v.Daily[:len(v.Daily)-1] {
		if d.Total != 0 {
			t.Errorf("%s: %+v, want zeros", d.Date, d)
		}
	}
	var agents int64
	app.DB.Gorm.Model(&models.UsageDaily{}).Where("tenant_id = ? AND agent_id = ?", tenant.TenantID, "writer").Count(&agents)
	if agents != 2 {
		t.Errorf("rows of agent writer = %d, want 2", agents)
	}
}

func TestUsageWindowNormalisation(t *testing.T) {
	for _, c := range []struct{ in, days, hours int }{
		{0, 30, 24}, {-5, 30, 24}, {1, 1, 1}, {7, 7, 7}, {90, 90, 90}, {91, 90, 91}, {168, 90, 168}, {500, 90, 168},
	} {
		if got := models.UsageDays(c.in); got != c.days {
			t.Errorf("UsageDays(%d) = %d, want %d", c.in, got, c.days)
		}
		if got := models.StatsHours(c.in); got != c.hours {
			t.Errorf("StatsHours(%d) = %d, want %d", c.in, got, c.hours)
		}
	}
}

func TestRecordUsageBatchesAndFlushes(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{})
	rows := func() (n int64) {
		app.DB.Gorm.Model(&models.UsageDaily{}).Where("tenant_id = ?", tenant.TenantID).Select("COALESCE(SUM(count), 0)").Scan(&n)
		return n
	}
	for range 50 {
		app.Credits().RecordUsage(tenant.TenantID, models.ServiceChat, "bot")
	}
	app.Credits().RecordUsage("", models.ServiceChat, "")
	if got := rows(); got != 0 {
		t.Fatalf("RecordUsage wrote %d at once; it must batch", got)
	}
	if err := app.Credits().FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 50 {
		t.Fatalf("after FlushUsage: %d, want 50", got)
	}
	if err := app.Credits().FlushUsage(context.Background()); err != nil || rows() != 50 {
		t.Fatalf("a second flush changed the counts: %d, %v", rows(), err)
	}
	app.Credits().RecordUsage(tenant.TenantID, models.ServiceChat, "bot")
	deadline := time.Now().Add(3 * time.Second)
	for rows() != 51 {
		if time.Now().After(deadline) {
			t.Fatalf("batched count not written within 3s: %d", rows())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := usage(t, app, tenant.TenantID, 1); v.Totals.Chat != 51 {
		t.Errorf("chat = %d, want 51", v.Totals.Chat)
	}
}

package models_test

import (
	"context"
	"testing"
	"time"

	"studio/models"
)

func TestTenantStatsFromJobRecords(t *testing.T) {
	app := newApp(t)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	app.Now = func() time.Time { return now }
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(40)), QuotaMonthly: ptr(int64(1000)), Markup: ptr(1.5)})
	member := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(10))})
	other := newTenant(t, app, models.TenantInput{Name: "Other"})
	if _, err := charge(app, member, 3); err != nil {
		t.Fatal(err)
	}
	job := func(tenantID string, status models.JobStatus, elapsed int64, cost float64, age time.Duration) string {
		j := models.Job{ID: models.NewID(), TenantID: &tenantID, Status: status, ElapsedMS: elapsed, CostUSD: cost, CreatedAt: now.Add(-age)}
		if err := app.DB.Gorm.Create(&j).Error; err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	attempt := func(jobID string, age time.Duration) {
		if err := app.DB.Gorm.Create(&models.UpstreamAttempt{Upstream: "img-a", JobID: jobID, OK: true, At: now.Add(-age)}).Error; err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(1); i <= 20; i++ { // elapsed 100..2000: nearest-rank P95 is the 19th, 1900
		id := job(tenant.TenantID, "done", i*100, 0.01, time.Hour)
		attempt(id, time.Hour)
	}
	failed := job(tenant.TenantID, "failed", 0, 0.02, 2*time.Hour)
	attempt(failed, 2*time.Hour)
	attempt(failed, 2*time.Hour)
	job(tenant.TenantID, "pending", 0, 0, time.Minute)
	old := job(tenant.TenantID, "done", 99999, 1, 30*time.Hour) // outside 24 h, inside 48 h
	attempt(old, 30*time.Hour)
	job(other.TenantID, "done", 5, 5, 90*time.Minute)
	task := models.VideoTask{ID: models.NewID(), TenantID: &tenant.TenantID, Status: "done", Model: "vidB-H3", Resolution: "720p",
		Duration: 5, Credits: 10, CostUSD: 0.5, CreatedAt: now.Add(-3 * time.Hour)}
	if err := app.DB.Gorm.Create(&task).Error; err != nil {
		t.Fatal(err)
	}
	attempt(task.ID, 3*time.Hour)

	v, err := app.Accounts().TenantStats(context.Background(), tenant, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.WindowHours != 24 || !v.GeneratedAt.Equal(now) {
		t.Errorf("window %d at %s", v.WindowHours, v.GeneratedAt)
	}
	if v.Tenant.Name != "Acme" || v.Tenant.QuotaMonthly != 1000 || v.Tenant.UsedMonth != 3 || v.Tenant.Credits != 37 {
		t.Errorf("tenant = %+v", v.Tenant)
	}
	want := models.StatsJobs{Total: 22, Done: 20, Failed: 1, Processing: 1, SuccessRate: 20.0 / 21.0, P95MS: 1900}
	if v.Mine.Jobs != want {
		t.Errorf("jobs = %+v, want %+v", v.Mine.Jobs, want)
	}
	if v.Mine.AttemptsTotal != 23 {
		t.Errorf("attempts_total = %d, want 23", v.Mine.AttemptsTotal)
	}
	// (20 * 0.01 + 0.02 + 0.5) USD * 7.2 * 1.5 = 7.776 CNY
	if v.Mine.ChargedCNY != 7.78 {
		t.Errorf("charged_cny = %v, want 7.78", v.Mine.ChargedCNY)
	}
	v, err = app.Accounts().TenantStats(context.Background(), tenant, 48)
	if err != nil {
		t.Fatal(err)
	}
	if v.WindowHours != 48 || v.Mine.Jobs.Total != 23 || v.Mine.Jobs.P95MS != 2000 || v.Mine.AttemptsTotal != 24 {
		t.Errorf("48 h: %+v", v)
	}
	empty, err := app.Accounts().TenantStats(context.Background(), other, 1)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Tenant.QuotaMonthly != 0 || empty.Mine.Jobs.Total != 0 || empty.Mine.Jobs.SuccessRate != 0 || empty.Mine.Jobs.P95MS != 0 {
		t.Errorf("tenant without jobs in the last hour: %+v", empty)
	}
}

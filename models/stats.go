package models

import (
	"context"
	"math"
	"time"
)

// Tenant statistics over a window of hours, computed from the real job records.

// The window of tenant statistics, in hours.
const (
	StatsDefaultHours = 24
	StatsMaxHours     = 168
)

// StatsView is the answer of GET /api/tenant-stats (spec 2.6); it never names a provider.
type StatsView struct {
	WindowHours int         `json:"window_hours"`
	GeneratedAt time.Time   `json:"generated_at"`
	Tenant      StatsTenant `json:"tenant"`
	Mine        StatsMine   `json:"mine"`
}

// StatsTenant is the tenant part of the statistics: its name, monthly quota and credits.
type StatsTenant struct {
	Name string `json:"name"`
	// QuotaMonthly is the tenant's monthly credit quota, 0 when it has none (spec 2.6: a number).
	QuotaMonthly int64 `json:"quota_monthly"`
	UsedMonth    int64 `json:"used_month"`
	Credits      int64 `json:"credits"`
}

// StatsMine is the tenant's own activity in the window.
type StatsMine struct {
	AttemptsTotal int64     `json:"attempts_total"`
	Jobs          StatsJobs `json:"jobs"`
	ChargedCNY    float64   `json:"charged_cny"`
}

// StatsJobs counts the tenant's image jobs created in the window.
type StatsJobs struct {
	Total      int64 `json:"total"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`
	Processing int64 `json:"processing"`
	// SuccessRate is done / (done + failed), 0 when no job has finished.
	SuccessRate float64 `json:"success_rate"`
	// P95MS is the 95th percentile (nearest rank) of elapsed_ms over done jobs, 0 when none.
	P95MS int64 `json:"p95_ms"`
}

// StatsHours turns a requested window into the one used: below 1 falls back to 24, above 168 is clamped to 168.
func StatsHours(hours int) int {
	switch {
	case hours < 1:
		return StatsDefaultHours
	case hours > StatsMaxHours:
		return StatsMaxHours
	}
	return hours
}

// TenantStats returns the tenant's statistics over the last hours (normalised by StatsHours):
// its image jobs by status with success rate and P95 latency, the upstream attempts of its jobs and
// video tasks, and charged_cny = sum(cost_usd) * SERVICE_USD_CNY * the tenant's markup.
func (acs *AccountService) TenantStats(ctx context.Context, id *Identity, hours int) (*StatsView, error) {
	a := acs.a
	t, err := a.reportedTenant(ctx, id)
	if err != nil {
		return nil, err
	}
	tenantID := t.ID
	hours = StatsHours(hours)
	now := a.Now().UTC()
	since := now.Add(-time.Duration(hours) * time.Hour)
	v := &StatsView{WindowHours: hours, GeneratedAt: now.Truncate(time.Second),
		Tenant: StatsTenant{Name: t.Name, Credits: t.Balance()}}
	if t.QuotaMonthly != nil {
		v.Tenant.QuotaMonthly = *t.QuotaMonthly
	}
	if t.UsedMonthKey == monthKey(now) {
		v.Tenant.UsedMonth = t.UsedMonth
	}
	db := a.DB.WithContext(ctx)
	var jobs struct {
		Total, Done, Failed int64
		Cost                float64
	}
	err = db.Model(&Job{}).Where("tenant_id = ? AND created_at >= ?", tenantID, since).
		Select("COUNT(*) AS total, "+
			"COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0) AS done, "+
			"COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0) AS failed, "+
			"COALESCE(SUM(cost_usd), 0) AS cost", JobDone, JobFailed).
		Scan(&jobs).Error
	if err != nil {
		return nil, Internal("stats: jobs", err)
	}
	j := &v.Mine.Jobs
	j.Total, j.Done, j.Failed = jobs.Total, jobs.Done, jobs.Failed
	j.Processing = jobs.Total - jobs.Done - jobs.Failed
	if finished := jobs.Done + jobs.Failed; finished > 0 {
		j.SuccessRate = float64(jobs.Done) / float64(finished)
	}
	if jobs.Done > 0 {
		rank := int(math.Ceil(0.95 * float64(jobs.Done)))
		var p95 []int64
		err = db.Model(&Job{}).Where("tenant_id = ? AND created_at >= ? AND status = ?", tenantID, since, JobDone).
			Order("elapsed_ms").Offset(rank-1).Limit(1).Pluck("elapsed_ms", &p95).Error
		if err != nil {
			return nil, Internal("stats: p95", err)
		}
		if len(p95) == 1 {
			j.P95MS = p95[0]
		}
	}
	var videoCost float64
	err = db.Model(&VideoTask{}).Where("tenant_id = ? AND created_at >= ?", tenantID, since).
		Select("COALESCE(SUM(cost_usd), 0)").Scan(&videoCost).Error
	if err != nil {
		return nil, Internal("stats: video cost", err)
	}
	err = db.Model(&UpstreamAttempt{}).
		Where("at >= ? AND (job_id IN (?) OR job_id IN (?))", since,
			db.Model(&Job{}).Select("id").Where("tenant_id = ?", tenantID),
			db.Model(&VideoTask{}).Select("id").Where("tenant_id = ?", tenantID)).
		Select("COALESCE(SUM(count), 0)").Scan(&v.Mine.AttemptsTotal).Error
	if err != nil {
		return nil, Internal("stats: attempts", err)
	}
	cny := (jobs.Cost + videoCost) * a.Config.USDCNY * t.Markup
	v.Mine.ChargedCNY = math.Round(cny*100) / 100
	return v, nil
}

package web

import (
	"fmt"
	"net/http"
	"strconv"

	"studio/models"
)

// dashboardView is the start page: for a tenant its pool, its statistics and its usage chart; for a
// member account or a personal account its balance (and, for a personal account, its claims).
type dashboardView struct {
	Chrome  chrome
	Kind    models.IdentityKind
	Pool    *models.PoolView
	Stats   *models.StatsView
	Usage   *models.UsageView
	Chart   barChart
	Balance *models.BalanceView
	Claims  *models.UserClaims
}

// dashboard shows the start page of the signed-in identity.
func (c *Console) dashboard(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	p := dashboardView{Chrome: c.chrome(v, "Dashboard", consolePrefix), Kind: v.id.Kind}
	p.Chrome.Notice = notice(r, v)
	var err error
	if v.id.May(models.CapTenantReports) {
		if p.Pool, err = c.svc.Credits().Pool(ctx, v.id); err != nil {
			return err
		}
		if p.Stats, err = c.svc.Accounts().TenantStats(ctx, v.id, models.StatsDefaultHours); err != nil {
			return err
		}
		if p.Usage, err = c.svc.Accounts().TenantUsage(ctx, v.id, models.UsageDefaultDays); err != nil {
			return err
		}
		p.Chart = usageChart(p.Usage)
	} else if p.Balance, err = c.svc.Credits().Balance(ctx, v.id); err != nil {
		return err
	}
	if v.id.May(models.CapClaims) {
		if p.Claims, err = c.svc.Claims().UserClaims(ctx, v.id); err != nil {
			return err
		}
	}
	c.render(w, r, http.StatusOK, dashboardPage(p))
	return nil
}

// barChart is a bar chart drawn as SVG on the server: no script, readable by screen readers through
// its title, description and the data table beside it.
type barChart struct {
	Width, Height int
	Bars          []chartBar
	Max           int64
	MaxLabelY     string
	BaseY         string
	FirstLabel    string
	LastLabel     string
	Summary       string
}

// chartBar is one bar with its geometry (SVG user units) and its label.
type chartBar struct {
	X, Y, W, H string
	Label      string
}

// Geometry of the usage chart.
const (
	chartWidth  = 720
	chartHeight = 220
	chartTop    = 16
	chartBottom = 28 // room for the date labels
	chartLeft   = 40 // room for the scale
)

// usageChart draws the daily totals of a usage report.
func usageChart(u *models.UsageView) barChart {
	ch := barChart{Width: chartWidth, Height: chartHeight}
	for _, d := range u.Daily {
		ch.Max = max(ch.Max, d.Total)
	}
	scale := max(ch.Max, 1)
	plotH := float64(chartHeight - chartTop - chartBottom)
	n := max(len(u.Daily), 1)
	slot := float64(chartWidth-chartLeft) / float64(n)
	base := float64(chartHeight - chartBottom)
	for i, d := range u.Daily {
		h := plotH * float64(d.Total) / float64(scale)
		if d.Total > 0 && h < 1 {
			h = 1
		}
		ch.Bars = append(ch.Bars, chartBar{
			X: num(float64(chartLeft) + float64(i)*slot + slot*0.15), Y: num(base - h),
			W: num(slot * 0.7), H: num(h),
			Label: fmt.Sprintf("%s: %d calls (image %d, video %d, chat %d, reverse %d, other %d)",
				d.Date, d.Total, d.Image, d.Video, d.Chat, d.Reverse, d.Other),
		})
	}
	ch.MaxLabelY, ch.BaseY = num(float64(chartTop)+4), num(base)
	if len(u.Daily) > 0 {
		ch.FirstLabel, ch.LastLabel = u.Daily[0].Date, u.Daily[len(u.Daily)-1].Date
	}
	ch.Summary = fmt.Sprintf("Calls per day over the last %d days (%s): %d in total, at most %d on one day.",
		u.Days, u.Timezone, u.Totals.Total, ch.Max)
	return ch
}

// num formats an SVG coordinate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// percent formats a 0..1 rate as a percentage.
func percent(rate float64) string { return strconv.FormatFloat(rate*100, 'f', 1, 64) + " %" }

// millis formats a duration in milliseconds as seconds.
func millis(ms int64) string {
	if ms == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

// successRate formats the success rate of finished jobs, "–" when none has finished.
func successRate(j models.StatsJobs) string {
	if j.Done+j.Failed == 0 {
		return "–"
	}
	return percent(j.SuccessRate)
}

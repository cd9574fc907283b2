package models

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Usage counts accepted calls per tenant, local day (Asia/Shanghai), service type and agent (D8).
// Metered calls record inside their own transaction with RecordUsageTx; free high-rate calls (chat)
// use RecordUsage, which counts in memory and writes at most once a second and on FlushUsage.

// The service types that usage rows record; any other name is reported as "other".
const (
	ServiceImage           = "image"
	ServiceVideo           = "video"
	ServiceChat            = "chat"
	ServiceCopy            = "copy"
	ServiceReverse         = "reverse"
	ServiceImageToTemplate = "image_to_template"
)

// The window of tenant usage, in local days.
const (
	UsageDefaultDays = 30
	UsageMaxDays     = 90
)

// UsageTimezone names the zone of usage days.
const UsageTimezone = "Asia/Shanghai"

// UsageFlushInterval is how long a batched usage count may wait in memory before it is written.
const UsageFlushInterval = time.Second

// UsageColumn returns the report column of a service type: copy counts as chat, and image-to-template
// and unknown types as other.
func UsageColumn(service string) string {
	switch service {
	case ServiceImage, ServiceVideo, ServiceReverse:
		return service
	case ServiceChat, ServiceCopy, "article":
		return ServiceChat
	}
	return "other"
}

// UsageCounts are the calls of one day or of the whole window, per report column.
type UsageCounts struct {
	Image   int64 `json:"image"`
	Video   int64 `json:"video"`
	Chat    int64 `json:"chat"`
	Reverse int64 `json:"reverse"`
	Other   int64 `json:"other"`
	Total   int64 `json:"total"`
}

func (c *UsageCounts) add(service string, n int64) {
	switch UsageColumn(service) {
	case ServiceImage:
		c.Image += n
	case ServiceVideo:
		c.Video += n
	case ServiceChat:
		c.Chat += n
	case ServiceReverse:
		c.Reverse += n
	default:
		c.Other += n
	}
	c.Total += n
}

// UsageDay is one local calendar day of usage.
type UsageDay struct {
	Date string `json:"date"` // YYYY-MM-DD in Asia/Shanghai
	UsageCounts
}

// UsageTenant names the tenant of a usage report.
type UsageTenant struct {
	Name string `json:"name"`
}

// UsageView is the answer of GET /api/tenant-usage (spec 2.6).
type UsageView struct {
	Tenant      UsageTenant `json:"tenant"`
	Timezone    string      `json:"timezone"`
	Days        int         `json:"days"`
	Since       time.Time   `json:"since"`
	GeneratedAt time.Time   `json:"generated_at"`
	Totals      UsageCounts `json:"totals"`
	Daily       []UsageDay  `json:"daily"`
}

// UsageDays turns a requested window into the one used: below 1 falls back to 30, above 90 is clamped to 90.
func UsageDays(days int) int {
	switch {
	case days < 1:
		return UsageDefaultDays
	case days > UsageMaxDays:
		return UsageMaxDays
	}
	return days
}

// TenantUsage returns the tenant's calls per local day over the last days (normalised by UsageDays),
// today included, oldest first, every day present and zero-filled.
func (acs *AccountService) TenantUsage(ctx context.Context, id *Identity, days int) (*UsageView, error) {
	a := acs.a
	t, err := a.reportedTenant(ctx, id)
	if err != nil {
		return nil, err
	}
	tenantID := t.ID
	days = UsageDays(days)
	now := a.Now()
	local := now.In(ShanghaiTZ)
	first := time.Date(local.Year(), local.Month(), local.Day()-(days-1), 0, 0, 0, 0, ShanghaiTZ)
	v := &UsageView{Tenant: UsageTenant{Name: t.Name}, Timezone: UsageTimezone, Days: days,
		Since: first.UTC(), GeneratedAt: now.UTC().Truncate(time.Second), Daily: make([]UsageDay, days)}
	index := make(map[string]int, days)
	for i := range v.Daily {
		d := first.AddDate(0, 0, i).Format(time.DateOnly)
		v.Daily[i].Date, index[d] = d, i
	}
	var rows []struct {
		Day     string
		Service string
		Total   int64
	}
	err = a.DB.WithContext(ctx).Model(&UsageDaily{}).
		Select("day, service, SUM(count) AS total").
		Where("tenant_id = ? AND day >= ? AND day <= ?", tenantID, v.Daily[0].Date, v.Daily[days-1].Date).
		Group("day, service").Scan(&rows).Error
	if err != nil {
		return nil, Internal("usage: read", err)
	}
	for _, r := range rows {
		if i, ok := index[r.Day]; ok {
			v.Daily[i].add(r.Service, r.Total)
			v.Totals.add(r.Service, r.Total)
		}
	}
	return v, nil
}

// usageKey names one usage row.
type usageKey struct{ tenant, day, service, agent string }

func (a *App) usageKeyNow(tenantID, service, agent string) usageKey {
	service = strings.ToLower(strings.TrimSpace(service))
	if service == "" {
		service = "other"
	}
	return usageKey{tenantID, a.Now().In(ShanghaiTZ).Format(time.DateOnly), clipUTF8(service, 32), clipUTF8(strings.TrimSpace(agent), 100)}
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// upsertUsage adds n to a usage row, creating it when absent.
func upsertUsage(tx *gorm.DB, k usageKey, n int64) error {
	row := UsageDaily{TenantID: k.tenant, Day: k.day, Service: k.service, AgentID: k.agent, Count: n}
	return tx.Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "tenant_id"}, {Name: "day"}, {Name: "service"}, {Name: "agent_id"}},
		DoUpdates: clause.Assignments(map[string]any{"count": gorm.Expr("? + ?",
			clause.Column{Table: clause.CurrentTable, Name: "count"}, clause.Column{Table: "excluded", Name: "count"})}),
	}).Create(&row).Error
}

// RecordUsageTx counts one accepted call of a service for the tenant's local day of a.Now(), inside the
// caller's transaction; agent is the X-CS-Agent name or "". A call without a tenant is not counted.
func (crs *CreditService) RecordUsageTx(tx *gorm.DB, tenantID, service, agent string) error {
	a := crs.a
	if tenantID == "" {
		return nil
	}
	if err := upsertUsage(tx, a.usageKeyNow(tenantID, service, agent), 1); err != nil {
		return Internal("usage: record", err)
	}
	return nil
}

// RecordUsage counts one accepted call without touching the database on the caller's path: the count
// is written within UsageFlushInterval, or by FlushUsage. A call without a tenant is not counted.
func (crs *CreditService) RecordUsage(tenantID, service, agent string) {
	a := crs.a
	if tenantID == "" {
		return
	}
	a.usageBatch().add(a.usageKeyNow(tenantID, service, agent))
}

// FlushUsage writes every batched usage count now; call it on shutdown.
func (crs *CreditService) FlushUsage(ctx context.Context) error {
	a := crs.a
	return a.usageBatch().flush(ctx)
}

// usageBatch is the in-memory counter of RecordUsage for one App.
type usageBatch struct {
	app       *App
	mu        sync.Mutex
	counts    map[usageKey]int64
	scheduled bool
	flushing  sync.Mutex // one flush at a time, so that FlushUsage returns after every count is written
}

// usageBatches holds the batch of each App; App has no field for it.
var usageBatches sync.Map // *App -> *usageBatch

func (a *App) usageBatch() *usageBatch {
	if b, ok := usageBatches.Load(a); ok {
		return b.(*usageBatch)
	}
	b, _ := usageBatches.LoadOrStore(a, &usageBatch{app: a, counts: map[usageKey]int64{}})
	return b.(*usageBatch)
}

func (b *usageBatch) add(k usageKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts[k]++
	if !b.scheduled {
		b.scheduled = true
		time.AfterFunc(UsageFlushInterval, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.flush(ctx); err != nil {
				slog.Error("usage: flush failed; the counts are kept for the next flush", "err", err)
			}
		})
	}
}

// flush writes the pending counts in one transaction; on failure they are kept for the next flush.
func (b *usageBatch) flush(ctx context.Context) error {
	b.flushing.Lock()
	defer b.flushing.Unlock()
	b.mu.Lock()
	counts := b.counts
	b.counts = map[usageKey]int64{}
	b.scheduled = false
	b.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(x, y usageKey) int { // one order on every replica: no deadlock
		return cmp.Or(cmp.Compare(x.tenant, y.tenant), cmp.Compare(x.day, y.day), cmp.Compare(x.service, y.service), cmp.Compare(x.agent, y.agent))
	})
	err := b.app.Tx(ctx, func(tx *gorm.DB) error {
		for _, k := range keys {
			if err := upsertUsage(tx, k, counts[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.mu.Lock()
		for k, n := range counts {
			b.counts[k] += n
		}
		b.mu.Unlock()
		return Internal("usage: flush", err)
	}
	return nil
}

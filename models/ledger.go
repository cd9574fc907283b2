package models

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"studio/models/metrics"
)

// The ledger: every movement of credits is one database transaction that updates the balances it
// touches with conditional updates (so that concurrent requests can never overspend) and writes one
// append-only LedgerEntry per balance moved. The sum of a balance's ledger deltas is that balance.
//
// Lock order. Every transaction that moves credits takes the row locks it needs in one order:
//
//  1. the record being charged or refunded (a job or video task row, when there is one);
//  2. the member account row (accounts), when a member is involved: ChargeTx and RefundTx lock it first
//     (SELECT ... FOR UPDATE) even when they only move the tenant's pool, and SetAccountQuota and
//     RekeyAccount lock it (lockAccount) before anything else;
//  3. the tenant row (tenants): spendable, reserved and the monthly quota;
//  4. everything written after the movement: ledger rows, usage counters, the queue.
//
// Rate counters (rate_counters) are taken before 2, and are per owner. A transaction that holds a
// lower-numbered row never waits for a higher-numbered one held by a transaction that waits for it, so
// two movements cannot deadlock on these rows. Should the database still roll a transaction back (a
// deadlock elsewhere, a serialization failure), App.Tx runs it again from the start.

// The balances a ledger row can move.
const (
	BalanceTenantSpendable = "tenant_spendable"
	BalanceTenantReserved  = "tenant_reserved"
	BalanceAccount         = "account"
	BalanceUser            = "user"
	// ChargedUnmetered marks a charge to an unmetered tenant: recorded, nothing deducted.
	ChargedUnmetered = "tenant_unmetered"
)

// The kinds of ledger rows: the movements of credits.
const (
	LedgerCharge      = "charge"
	LedgerRefund      = "refund"
	LedgerGrant       = "grant"
	LedgerAllocate    = "allocate"
	LedgerRelease     = "release"
	LedgerClaim       = "claim"
	LedgerAdminCredit = "admin_credit"
)

// InsufficientAllocatableMessage is the fixed refusal of a dedicated allocation above what the pool can give.
const InsufficientAllocatableMessage = "可分配积分不足"

// ShanghaiTZ is the local time zone of usage days and monthly quotas.
var ShanghaiTZ = mustLoadLocation("Asia/Shanghai")

func mustLoadLocation(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.FixedZone("CST", 8*3600)
	}
	return loc
}

// monthKey is the local calendar month of t, e.g. "2026-11".
func monthKey(t time.Time) string { return t.In(ShanghaiTZ).Format("2006-01") }

// Charge is what a successful charge took, kept on the job so that a refund returns exactly it.
type Charge struct {
	Amount    int64
	ChargedTo string // tenant_spendable | account | user | tenant_unmetered
}

// ledger writes the rows of one movement; every movement goes through here.
type ledger struct {
	tx    *gorm.DB
	txID  string
	now   time.Time
	month string
}

func (a *App) newLedger(tx *gorm.DB) *ledger {
	now := a.Now().UTC()
	return &ledger{tx: tx, txID: NewID(), now: now, month: monthKey(now)}
}

func (l *ledger) write(kind, balance string, tenantID, accountID, userID string, delta, after int64, ref, note string) error {
	e := l.entry(kind, balance, tenantID, accountID, userID, delta, after, ref, note)
	if err := l.tx.Create(&e).Error; err != nil {
		return fmt.Errorf("ledger: write %s: %w", kind, err)
	}
	afterCommit(l.tx, func() { countCredits(&e) })
	return nil
}

// entry is a ledger row of this movement.
func (l *ledger) entry(kind, balance string, tenantID, accountID, userID string, delta, after int64, ref, note string) LedgerEntry {
	e := LedgerEntry{At: l.now, TxID: l.txID, Kind: kind, Balance: balance, Delta: delta, After: after, Ref: ref, Note: note}
	if tenantID != "" {
		e.TenantID = &tenantID
	}
	if accountID != "" {
		e.AccountID = &accountID
	}
	if userID != "" {
		e.UserID = &userID
	}
	return e
}

// countCredits adds a written row to the credits metric, once its transaction has committed.
func countCredits(e *LedgerEntry) {
	if e.Delta != 0 && e.Balance != BalanceTenantReserved {
		// Reserved rows mirror member rows; counting both would double the figure.
		metrics.Credits.WithLabelValues(e.Kind).Add(float64(abs64(e.Delta)))
	}
}

func insufficient(need, have int64) *Error {
	if have < 0 {
		have = 0
	}
	return &Error{Kind: KindInsufficientCredits,
		Message: fmt.Sprintf("insufficient credits: need %d, have %d, missing %d", need, have, need-have)}
}

// ChargeTx charges amount credits to the identity inside tx: tenants and shared members spend from the
// tenant's spendable pool, dedicated members from their own credits (part of the tenant's reserved),
// personal logins from theirs. An unmetered tenant is not deducted (its dedicated members still are);
// a monthly quota caps what a tenant spends per local calendar month. When it fails nothing is
// deducted and the error (KindInsufficientCredits) says how many credits are missing.
func (crs *CreditService) ChargeTx(tx *gorm.DB, id *Identity, amount int64, ref, note string) (Charge, error) {
	a := crs.a
	if amount <= 0 {
		return Charge{}, nil
	}
	l := a.newLedger(tx)
	switch id.Kind {
	case IdentityUser:
		return l.chargeUser(id.UserID, amount, ref, note)
	case IdentityTenant, IdentityAccount:
	default:
		return Charge{}, Forbidden("this identity has no credits to spend")
	}
	if id.Kind == IdentityTenant {
		// The common case in one statement: a metered tenant whose pool allows the charge. Anything
		// else (unmetered, short of credits, over quota) reads the tenant and takes the full path.
		if c, ok, err := l.tryPool(id.TenantID, "", amount, ref, note, true); err != nil || ok {
			return c, err
		}
	}
	// The lock order: the member's account row before the tenant's row, whichever balance pays.
	var acc *Account
	if id.Kind == IdentityAccount {
		var err error
		if acc, err = lockAccount(tx, id.TenantID, id.AccountID); err != nil {
			return Charge{}, err
		}
	}
	t, err := findTenant(tx, id.TenantID)
	if err != nil {
		return Charge{}, err
	}
	accountID := ""
	if acc != nil {
		if !acc.Shared {
			return l.chargeDedicated(t, acc.ID, amount, ref, note)
		}
		accountID = acc.ID
	}
	if t.Unmetered {
		return l.chargeUnmetered(t.ID, accountID, amount, ref, note)
	}
	return l.chargePool(t.ID, accountID, amount, ref, note)
}

func (l *ledger) chargeUser(userID string, amount int64, ref, note string) (Charge, error) {
	res := l.tx.Model(&User{}).Where("id = ? AND credits >= ?", userID, amount).Update("credits", gorm.Expr("credits - ?", amount))
	if res.Error != nil {
		return Charge{}, Internal("ledger: charge user", res.Error)
	}
	var u User
	if err := l.tx.Select("credits").First(&u, "id = ?", userID).Error; err != nil {
		return Charge{}, Internal("ledger: read user", err)
	}
	if res.RowsAffected == 0 {
		return Charge{}, insufficient(amount, u.Credits)
	}
	return Charge{amount, BalanceUser}, l.write(LedgerCharge, BalanceUser, "", "", userID, -amount, u.Credits, ref, note)
}

// spendTenant counts amount against the tenant's monthly quota and, when column is not empty, takes it
// from that column (spendable or reserved); it reports false when a condition refused it, and otherwise
// the tenant as the update left it (one statement: UPDATE ... RETURNING). meteredOnly refuses an
// unmetered tenant, for callers that have not read the tenant first.
func (l *ledger) spendTenant(tenantID, column string, amount int64, meteredOnly bool) (bool, *Tenant, error) {
	var t Tenant
	res := l.spendQuery(l.tx, &t, tenantID, column, amount, meteredOnly)
	if res.Error != nil || res.RowsAffected != 1 {
		return false, nil, res.Error
	}
	if t.ID != tenantID { // a driver that returned no row: read it (same transaction, row locked)
		cur, err := findTenant(l.tx, tenantID)
		return err == nil, cur, err
	}
	return true, &t, nil
}

// spendQuery runs on db (or, in a DryRun session, only builds) the conditional update of spendTenant,
// returning into t.
func (l *ledger) spendQuery(db *gorm.DB, t *Tenant, tenantID, column string, amount int64, meteredOnly bool) *gorm.DB {
	q := db.Model(t).Clauses(clause.Returning{}).Where("id = ?", tenantID).
		Where("(quota_monthly IS NULL OR (CASE WHEN used_month_key = ? THEN used_month ELSE 0 END) + ? <= quota_monthly)", l.month, amount)
	if meteredOnly {
		q = q.Where("unmetered = ?", false)
	}
	set := map[string]any{
		"used_month":     gorm.Expr("CASE WHEN used_month_key = ? THEN used_month + ? ELSE ? END", l.month, amount, amount),
		"used_month_key": l.month,
	}
	if column != "" {
		q = q.Where(column+" >= ?", amount)
		set[column] = gorm.Expr(column+" - ?", amount)
	}
	return q.Updates(set)
}

// quotaRefusal returns the refusal when amount more would exceed the tenant's monthly quota, else nil.
func (l *ledger) quotaRefusal(t *Tenant, amount int64) error {
	if t.QuotaMonthly == nil {
		return nil
	}
	used := t.UsedMonth
	if t.UsedMonthKey != l.month {
		used = 0
	}
	if used+amount <= *t.QuotaMonthly {
		return nil
	}
	return &Error{Kind: KindInsufficientCredits, Message: fmt.Sprintf(
		"monthly quota exceeded: quota %d, used %d this month, need %d more", *t.QuotaMonthly, used, amount)}
}

// chargeRetries bounds how often a refused conditional update is tried again when a fresh read shows
// that a concurrent movement has made room meanwhile.
const chargeRetries = 3

func (l *ledger) chargePool(tenantID, accountID string, amount int64, ref, note string) (Charge, error) {
	for attempt := 1; ; attempt++ {
		c, ok, err := l.tryPool(tenantID, accountID, amount, ref, note, false)
		if err != nil || ok {
			return c, err
		}
		t, err := findTenant(l.tx, tenantID)
		if err != nil {
			return Charge{}, err
		}
		if t.Spendable < amount {
			return Charge{}, insufficient(amount, t.Spendable)
		}
		if err := l.quotaRefusal(t, amount); err != nil {
			return Charge{}, err
		}
		if attempt == chargeRetries {
			return Charge{}, Conflict("credits changed concurrently; retry the request")
		}
	}
}

// tryPool takes amount from the tenant's spendable credits when every condition allows it, and writes
// the ledger row; ok is false (and nothing changed) otherwise.
func (l *ledger) tryPool(tenantID, accountID string, amount int64, ref, note string, meteredOnly bool) (Charge, bool, error) {
	if l.tx.Dialector.Name() == "postgres" {
		return l.tryPoolOneStatement(tenantID, accountID, amount, ref, note, meteredOnly)
	}
	ok, t, err := l.spendTenant(tenantID, "spendable", amount, meteredOnly)
	if err != nil {
		return Charge{}, false, Internal("ledger: charge tenant", err)
	}
	if !ok {
		return Charge{}, false, nil
	}
	return Charge{amount, BalanceTenantSpendable}, true,
		l.write(LedgerCharge, BalanceTenantSpendable, t.ID, accountID, "", -amount, t.Spendable, ref, note)
}

// tryPoolOneStatement is tryPool on PostgreSQL in one round trip: spendTenant's update and the ledger
// row it writes are one statement (the row is inserted from what the update returned), so a charge
// holds the tenant's row for one statement less. This is the path of every charge of a tenant key.
func (l *ledger) tryPoolOneStatement(tenantID, accountID string, amount int64, ref, note string, meteredOnly bool) (Charge, bool, error) {
	update := l.spendQuery(l.tx.Session(&gorm.Session{DryRun: true}), &Tenant{}, tenantID, "spendable", amount, meteredOnly)
	if update.Error != nil {
		return Charge{}, false, Internal("ledger: charge tenant", update.Error)
	}
	e := l.entry(LedgerCharge, BalanceTenantSpendable, tenantID, accountID, "", -amount, 0, ref, note)
	vars := append(slices.Clone(update.Statement.Vars), e.At, e.TxID, e.Kind, e.Balance, e.TenantID, e.AccountID, e.UserID, e.Delta, e.Ref, e.Note)
	n := len(update.Statement.Vars)
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	query := "WITH t AS (" + update.Statement.SQL.String() + ") INSERT INTO ledger_entries " +
		"(at, tx_id, kind, balance, tenant_id, account_id, user_id, delta, after, ref, note) SELECT " +
		strings.Join([]string{p(1) + "::timestamptz", p(2), p(3), p(4), p(5), p(6), p(7), p(8) + "::bigint", "t.spendable", p(9), p(10)}, ", ") +
		" FROM t RETURNING after"
	var after []int64
	// The query holds no "?": GORM passes vars on as they are, for the numbered parameters.
	if err := l.tx.Raw(query, vars...).Scan(&after).Error; err != nil {
		return Charge{}, false, Internal("ledger: charge tenant", err)
	}
	if len(after) == 0 {
		return Charge{}, false, nil
	}
	e.After = after[0]
	afterCommit(l.tx, func() { countCredits(&e) })
	return Charge{amount, BalanceTenantSpendable}, true, nil
}

func (l *ledger) chargeUnmetered(tenantID, accountID string, amount int64, ref, note string) (Charge, error) {
	ok, t, err := l.spendTenant(tenantID, "", amount, false)
	if err != nil {
		return Charge{}, Internal("ledger: charge unmetered", err)
	}
	if !ok {
		cur, err := findTenant(l.tx, tenantID)
		if err != nil {
			return Charge{}, err
		}
		if err := l.quotaRefusal(cur, amount); err != nil {
			return Charge{}, err
		}
		return Charge{}, Conflict("credits changed concurrently; retry the request")
	}
	return Charge{amount, ChargedUnmetered}, l.write(LedgerCharge, BalanceTenantSpendable, t.ID, accountID, "", 0, t.Spendable, ref,
		fmt.Sprintf("unmetered: %d credits not deducted", amount))
}

// chargeDedicated takes amount from a dedicated member's credits and the tenant's reserved part.
func (l *ledger) chargeDedicated(t *Tenant, accountID string, amount int64, ref, note string) (Charge, error) {
	res := l.tx.Model(&Account{}).Where("id = ? AND shared = ? AND credits >= ?", accountID, false, amount).
		Update("credits", gorm.Expr("credits - ?", amount))
	if res.Error != nil {
		return Charge{}, Internal("ledger: charge account", res.Error)
	}
	var acc Account
	if err := l.tx.First(&acc, "id = ?", accountID).Error; err != nil {
		return Charge{}, Internal("ledger: read account", err)
	}
	if res.RowsAffected == 0 {
		if acc.Shared { // moved to shared mode concurrently: it spends from the pool now
			if t.Unmetered {
				return l.chargeUnmetered(t.ID, acc.ID, amount, ref, note)
			}
			return l.chargePool(t.ID, acc.ID, amount, ref, note)
		}
		return Charge{}, insufficient(amount, acc.Credits)
	}
	ok, cur, err := l.spendTenant(t.ID, "reserved", amount, false)
	if err != nil {
		return Charge{}, Internal("ledger: charge tenant reserved", err)
	}
	if !ok {
		// Put the member's credits back so that nothing stays deducted even if the caller goes on.
		if err := l.tx.Model(&Account{}).Where("id = ?", acc.ID).Update("credits", gorm.Expr("credits + ?", amount)).Error; err != nil {
			return Charge{}, Internal("ledger: undo account charge", err)
		}
		cur, err := findTenant(l.tx, t.ID)
		if err != nil {
			return Charge{}, err
		}
		if err := l.quotaRefusal(cur, amount); err != nil {
			return Charge{}, err
		}
		return Charge{}, Internal("ledger: reserved below a member's credits", fmt.Errorf("tenant %s", t.ID))
	}
	if err := l.write(LedgerCharge, BalanceAccount, t.ID, acc.ID, "", -amount, acc.Credits, ref, note); err != nil {
		return Charge{}, err
	}
	return Charge{amount, BalanceAccount}, l.write(LedgerCharge, BalanceTenantReserved, t.ID, acc.ID, "", -amount, cur.Reserved, ref, note)
}

// RefundTx returns exactly what a charge took, to where it came from: a dedicated member's refund goes
// back to its credits, or to the pool's spendable part when the member has moved to shared mode since.
// The caller guarantees "once" with a conditional update of the charged record in the same transaction
// (RefundJobTx, RefundVideoTx).
func (crs *CreditService) RefundTx(tx *gorm.DB, tenantID, accountID, userID string, c Charge, ref, note string) error {
	a := crs.a
	if c.Amount <= 0 {
		return nil
	}
	if accountID != "" && c.ChargedTo != BalanceUser {
		// The lock order: the member's account row before the tenant's row, whichever balance is refunded.
		var locked []string
		if err := tx.Model(&Account{}).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", accountID).Pluck("id", &locked).Error; err != nil {
			return Internal("ledger: lock account", err)
		}
	}
	l := a.newLedger(tx)
	unuse := map[string]any{"used_month": gorm.Expr(
		"CASE WHEN used_month_key = ? AND used_month >= ? THEN used_month - ? ELSE used_month END", l.month, c.Amount, c.Amount)}
	switch c.ChargedTo {
	case BalanceUser:
		if err := tx.Model(&User{}).Where("id = ?", userID).Update("credits", gorm.Expr("credits + ?", c.Amount)).Error; err != nil {
			return Internal("ledger: refund user", err)
		}
		var u User
		if err := tx.Select("credits").First(&u, "id = ?", userID).Error; err != nil {
			return Internal("ledger: refund user", err)
		}
		return l.write(LedgerRefund, BalanceUser, "", "", userID, c.Amount, u.Credits, ref, note)
	case ChargedUnmetered:
		if err := tx.Model(&Tenant{}).Where("id = ?", tenantID).Updates(unuse).Error; err != nil {
			return Internal("ledger: refund unmetered", err)
		}
		t, err := findTenant(tx, tenantID)
		if err != nil {
			return err
		}
		return l.write(LedgerRefund, BalanceTenantSpendable, tenantID, accountID, "", 0, t.Spendable, ref,
			fmt.Sprintf("unmetered: %d credits not deducted", c.Amount))
	case BalanceAccount:
		res := tx.Model(&Account{}).Where("id = ? AND tenant_id = ? AND shared = ?", accountID, tenantID, false).
			Update("credits", gorm.Expr("credits + ?", c.Amount))
		if res.Error != nil {
			return Internal("ledger: refund account", res.Error)
		}
		if res.RowsAffected == 1 {
			unuse["reserved"] = gorm.Expr("reserved + ?", c.Amount)
			if err := tx.Model(&Tenant{}).Where("id = ?", tenantID).Updates(unuse).Error; err != nil {
				return Internal("ledger: refund reserved", err)
			}
			var acc Account
			if err := tx.Select("credits").First(&acc, "id = ?", accountID).Error; err != nil {
				return Internal("ledger: refund account", err)
			}
			t, err := findTenant(tx, tenantID)
			if err != nil {
				return err
			}
			if err := l.write(LedgerRefund, BalanceAccount, tenantID, accountID, "", c.Amount, acc.Credits, ref, note); err != nil {
				return err
			}
			return l.write(LedgerRefund, BalanceTenantReserved, tenantID, accountID, "", c.Amount, t.Reserved, ref, note)
		}
		// The member moved to shared mode since: its dedicated credits went back to the pool, and so does this refund.
		fallthrough
	case BalanceTenantSpendable:
		unuse["spendable"] = gorm.Expr("spendable + ?", c.Amount)
		if err := tx.Model(&Tenant{}).Where("id = ?", tenantID).Updates(unuse).Error; err != nil {
			return Internal("ledger: refund tenant", err)
		}
		t, err := findTenant(tx, tenantID)
		if err != nil {
			return err
		}
		return l.write(LedgerRefund, BalanceTenantSpendable, tenantID, accountID, "", c.Amount, t.Spendable, ref, note)
	}
	return Internal("ledger: refund", fmt.Errorf("unknown balance %q", c.ChargedTo))
}

// RefundJobTx refunds a failed job's charge at most once: it sets refunded_at with a conditional update
// and returns the credits only when that update claimed the job. It reports whether this call refunded.
func (crs *CreditService) RefundJobTx(tx *gorm.DB, job *Job) (bool, error) {
	a := crs.a
	now := a.Now().UTC()
	res := tx.Model(&Job{}).Where("id = ? AND refunded_at IS NULL", job.ID).Update("refunded_at", now)
	if res.Error != nil {
		return false, Internal("ledger: mark job refunded", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	job.RefundedAt = &now
	err := a.Credits().RefundTx(tx, deref(job.TenantID), deref(job.AccountID), deref(job.UserID), Charge{job.Credits, job.ChargedTo}, job.ID, "job "+string(job.Status))
	return err == nil, err
}

// RefundVideoTx refunds a failed or cancelled video task's charge at most once, like RefundJobTx.
func (crs *CreditService) RefundVideoTx(tx *gorm.DB, task *VideoTask) (bool, error) {
	a := crs.a
	now := a.Now().UTC()
	res := tx.Model(&VideoTask{}).Where("id = ? AND refunded_at IS NULL", task.ID).Update("refunded_at", now)
	if res.Error != nil {
		return false, Internal("ledger: mark video task refunded", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	task.RefundedAt = &now
	err := a.Credits().RefundTx(tx, deref(task.TenantID), deref(task.AccountID), deref(task.UserID), Charge{task.Credits, task.ChargedTo}, task.ID, "video task "+string(task.Status))
	return err == nil, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// moveToAccount moves delta credits from the tenant's spendable part to a dedicated member's credits
// (delta > 0, kind allocate) or back (delta < 0, kind release). The caller holds the account row.
func (l *ledger) moveToAccount(tenantID, accountID string, delta int64, note string) error {
	if delta == 0 {
		return nil
	}
	kind, tq := LedgerAllocate, l.tx.Model(&Tenant{}).Where("id = ?", tenantID)
	if delta > 0 {
		tq = tq.Where("spendable >= ?", delta)
	} else {
		kind, tq = LedgerRelease, tq.Where("reserved >= ?", -delta)
	}
	res := tq.Updates(map[string]any{"spendable": gorm.Expr("spendable - ?", delta), "reserved": gorm.Expr("reserved + ?", delta)})
	if res.Error != nil {
		return Internal("ledger: "+kind+" tenant", res.Error)
	}
	if res.RowsAffected == 0 {
		if delta > 0 {
			return Invalid(InsufficientAllocatableMessage)
		}
		return Internal("ledger: reserved below a member's credits", fmt.Errorf("tenant %s", tenantID))
	}
	res = l.tx.Model(&Account{}).Where("id = ? AND credits + ? >= 0", accountID, delta).Update("credits", gorm.Expr("credits + ?", delta))
	if res.Error != nil || res.RowsAffected == 0 {
		if res.Error != nil {
			return Internal("ledger: "+kind+" account", fmt.Errorf("account %s: %w", accountID, res.Error))
		}
		return Internal("ledger: "+kind+" account", fmt.Errorf("account %s: credits would go below zero", accountID))
	}
	var acc Account
	if err := l.tx.Select("credits").First(&acc, "id = ?", accountID).Error; err != nil {
		return Internal("ledger: read account", err)
	}
	t, err := findTenant(l.tx, tenantID)
	if err != nil {
		return err
	}
	if err := l.write(kind, BalanceAccount, tenantID, accountID, "", delta, acc.Credits, "", note); err != nil {
		return err
	}
	if err := l.write(kind, BalanceTenantReserved, tenantID, accountID, "", delta, t.Reserved, "", note); err != nil {
		return err
	}
	return l.write(kind, BalanceTenantSpendable, tenantID, accountID, "", -delta, t.Spendable, "", note)
}

// creditTenant adds a signed delta to the tenant's spendable pool; it never goes below zero.
func (a *App) creditTenant(tx *gorm.DB, t *Tenant, delta int64, kind, ref, note string) error {
	res := tx.Model(&Tenant{}).Where("id = ? AND spendable + ? >= 0", t.ID, delta).Update("spendable", gorm.Expr("spendable + ?", delta))
	if res.Error != nil {
		return Internal("ledger: credit tenant", res.Error)
	}
	if res.RowsAffected == 0 {
		cur, err := findTenant(tx, t.ID)
		if err != nil {
			return err
		}
		return &Error{Kind: KindConflict, Message: fmt.Sprintf("insufficient credits: need %d, have %d, missing %d", -delta, cur.Spendable, -delta-cur.Spendable)}
	}
	cur, err := findTenant(tx, t.ID)
	if err != nil {
		return err
	}
	*t = *cur
	return a.newLedger(tx).write(kind, BalanceTenantSpendable, t.ID, "", "", delta, t.Spendable, ref, note)
}

// CreditTenant applies an administrator's signed credit delta to a tenant's spendable pool.
func (crs *CreditService) CreditTenant(ctx context.Context, tenantID string, delta int64) (*Tenant, error) {
	a := crs.a
	if delta == 0 {
		return nil, Invalid("credits must be a non-zero integer")
	}
	var t *Tenant
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		if t, err = findTenant(tx, tenantID); err != nil {
			return err
		}
		if err := a.creditTenant(tx, t, delta, LedgerAdminCredit, "", "administrator credit"); err != nil {
			if KindOf(err) == KindConflict {
				return Invalid("cannot remove %d credits: the tenant has %d spendable", -delta, t.Spendable)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, asCoreError("ledger: credit tenant", err)
	}
	return t, nil
}

// CreditUser applies a signed credit delta to a personal account (administrator action or claim grant).
func (crs *CreditService) CreditUser(ctx context.Context, userID string, delta int64, kind, ref, note string) (int64, error) {
	a := crs.a
	var after int64
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		after, err = a.creditUserTx(tx, userID, delta, kind, ref, note)
		return err
	})
	return after, err
}

func (a *App) creditUserTx(tx *gorm.DB, userID string, delta int64, kind, ref, note string) (int64, error) {
	if delta == 0 {
		return 0, Invalid("credits must be a non-zero integer")
	}
	res := tx.Model(&User{}).Where("id = ? AND credits + ? >= 0", userID, delta).Update("credits", gorm.Expr("credits + ?", delta))
	if res.Error != nil {
		return 0, Internal("ledger: credit user", res.Error)
	}
	var u User
	if err := tx.First(&u, "id = ?", userID).Error; err != nil {
		return 0, NotFound("user")
	}
	if res.RowsAffected == 0 {
		return 0, Invalid("cannot remove %d credits: the user has %d", -delta, u.Credits)
	}
	return u.Credits, a.newLedger(tx).write(kind, BalanceUser, "", "", userID, delta, u.Credits, ref, note)
}

// AuditLedger compares every balance with the sum of its ledger rows and every tenant's reserved part
// with the sum of its dedicated members' credits; it returns one line per discrepancy, none when sound.
func (crs *CreditService) AuditLedger(ctx context.Context) ([]string, error) {
	a := crs.a
	db := a.DB.WithContext(ctx)
	type sum struct {
		Balance string
		Owner   string
		Total   int64
	}
	var sums []sum
	err := db.Model(&LedgerEntry{}).
		Select("balance, CASE WHEN balance = ? THEN account_id WHEN balance = ? THEN user_id ELSE tenant_id END AS owner, SUM(delta) AS total",
			BalanceAccount, BalanceUser).
		Group("balance, owner").Scan(&sums).Error
	if err != nil {
		return nil, Internal("ledger: audit sums", err)
	}
	ledgered := map[string]int64{}
	for _, s := range sums {
		ledgered[s.Balance+"/"+s.Owner] = s.Total
	}
	var out []string
	check := func(balance, owner string, have int64) {
		if want := ledgered[balance+"/"+owner]; want != have {
			out = append(out, fmt.Sprintf("%s %s: balance %d, ledger sum %d", balance, owner, have, want))
		}
		delete(ledgered, balance+"/"+owner)
	}
	var tenants []Tenant
	if err := db.Order("id").Find(&tenants).Error; err != nil {
		return nil, Internal("ledger: audit tenants", err)
	}
	var accounts []Account
	if err := db.Order("id").Find(&accounts).Error; err != nil {
		return nil, Internal("ledger: audit accounts", err)
	}
	var users []User
	if err := db.Select("id, credits").Order("id").Find(&users).Error; err != nil {
		return nil, Internal("ledger: audit users", err)
	}
	dedicated := map[string]int64{}
	for _, acc := range accounts {
		check(BalanceAccount, acc.ID, acc.Credits)
		if acc.Shared && acc.Credits != 0 {
			out = append(out, fmt.Sprintf("account %s: shared with %d dedicated credits", acc.ID, acc.Credits))
		}
		if !acc.Shared {
			dedicated[acc.TenantID] += acc.Credits
		}
	}
	for _, t := range tenants {
		check(BalanceTenantSpendable, t.ID, t.Spendable)
		check(BalanceTenantReserved, t.ID, t.Reserved)
		if t.Spendable < 0 || t.Reserved < 0 {
			out = append(out, fmt.Sprintf("tenant %s: negative pool (spendable %d, reserved %d)", t.ID, t.Spendable, t.Reserved))
		}
		if dedicated[t.ID] != t.Reserved {
			out = append(out, fmt.Sprintf("tenant %s: reserved %d, dedicated credits %d", t.ID, t.Reserved, dedicated[t.ID]))
		}
	}
	for _, u := range users {
		check(BalanceUser, u.ID, u.Credits)
	}
	for k, v := range ledgered {
		if v != 0 {
			out = append(out, fmt.Sprintf("%s: ledger sum %d for no such balance", k, v))
		}
	}
	return out, nil
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// CreditService holds balances and the ledger: every charge, refund, allocation and grant, and usage.
type CreditService struct{ a *App }

// Credits returns balances and the ledger.
func (a *App) Credits() *CreditService { return a.svc.credits }

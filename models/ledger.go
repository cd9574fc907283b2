package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The balances a ledger row can move.
const (
	BalanceTenantSpendable = "tenant_spendable"
	BalanceTenantReserved  = "tenant_reserved"
	BalanceAccount         = "account"
	BalanceUser            = "user"
	// ChargedUnmetered marks a charge to an unmetered tenant: recorded, nothing deducted.
	ChargedUnmetered = "tenant_unmetered"
)

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

// ledger writes one append-only row; every movement goes through here.
type ledger struct {
	tx   *gorm.DB
	txID string
	now  time.Time
}

func (a *App) newLedger(tx *gorm.DB) *ledger { return &ledger{tx: tx, txID: NewID(), now: a.Now()} }

func (l *ledger) write(kind, balance string, tenantID, accountID, userID string, delta, after int64, ref, note string) error {
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
	if err := l.tx.Create(&e).Error; err != nil {
		return fmt.Errorf("ledger: write %s: %w", kind, err)
	}
	return nil
}

func insufficient(need, have int64) *Error {
	if have < 0 {
		have = 0
	}
	return &Error{Kind: KindInsufficientCredits,
		Message: fmt.Sprintf("insufficient credits: need %d, have %d, missing %d", need, have, need-have)}
}

// ChargeTx charges amount credits to the identity inside tx: tenants and shared members spend from the
// tenant's spendable pool, dedicated members from their own credits, personal logins from theirs.
// Nothing is deducted when it fails; the error says how many credits are missing.
func (a *App) ChargeTx(tx *gorm.DB, id *Identity, amount int64, ref, note string) (Charge, error) {
	if amount <= 0 {
		return Charge{}, nil
	}
	l := a.newLedger(tx)
	switch id.Kind {
	case IdentityUser:
		res := tx.Model(&User{}).Where("id = ? AND credits >= ?", id.UserID, amount).
			Update("credits", gorm.Expr("credits - ?", amount))
		if res.Error != nil {
			return Charge{}, Internal("ledger: charge user", res.Error)
		}
		var u User
		if err := tx.Select("credits").First(&u, "id = ?", id.UserID).Error; err != nil {
			return Charge{}, Internal("ledger: read user", err)
		}
		if res.RowsAffected == 0 {
			return Charge{}, insufficient(amount, u.Credits)
		}
		return Charge{amount, BalanceUser}, l.write("charge", BalanceUser, "", "", id.UserID, -amount, u.Credits, ref, note)
	case IdentityTenant, IdentityAccount:
	default:
		return Charge{}, Forbidden("this identity has no credits to spend")
	}
	t, err := findTenant(tx, id.TenantID)
	if err != nil {
		return Charge{}, err
	}
	month := monthKey(l.now)
	usedExpr := gorm.Expr("CASE WHEN used_month_key = ? THEN used_month + ? ELSE ? END", month, amount, amount)
	quotaOK := "(quota_monthly IS NULL OR (CASE WHEN used_month_key = ? THEN used_month ELSE 0 END) + ? <= quota_monthly)"
	quotaErr := func() error {
		used := t.UsedMonth
		if t.UsedMonthKey != month {
			used = 0
		}
		if t.QuotaMonthly != nil && used+amount > *t.QuotaMonthly {
			return &Error{Kind: KindInsufficientCredits, Message: fmt.Sprintf(
				"monthly quota exceeded: quota %d, used %d this month, need %d more", *t.QuotaMonthly, used, amount)}
		}
		return nil
	}
	var acc Account
	if id.Kind == IdentityAccount {
		if err := tx.First(&acc, "id = ? AND tenant_id = ?", id.AccountID, id.TenantID).Error; err != nil {
			return Charge{}, Internal("ledger: read account", err)
		}
	}
	if id.Kind == IdentityAccount && !acc.Shared {
		if acc.Credits < amount {
			return Charge{}, insufficient(amount, acc.Credits)
		}
		res := tx.Model(&Account{}).Where("id = ? AND credits >= ?", acc.ID, amount).Update("credits", gorm.Expr("credits - ?", amount))
		if res.Error != nil {
			return Charge{}, Internal("ledger: charge account", res.Error)
		}
		if res.RowsAffected == 0 {
			tx.Select("credits").First(&acc, "id = ?", acc.ID)
			return Charge{}, insufficient(amount, acc.Credits)
		}
		res = tx.Model(&Tenant{}).Where("id = ? AND reserved >= ? AND "+quotaOK, t.ID, amount, month, amount).
			Updates(map[string]any{"reserved": gorm.Expr("reserved - ?", amount), "used_month": usedExpr, "used_month_key": month})
		if res.Error != nil {
			return Charge{}, Internal("ledger: charge tenant reserved", res.Error)
		}
		if res.RowsAffected == 0 {
			if err := quotaErr(); err != nil {
				return Charge{}, err
			}
			return Charge{}, Internal("ledger: reserved below a member's credits", fmt.Errorf("tenant %s", t.ID))
		}
		if err := l.write("charge", BalanceAccount, t.ID, acc.ID, "", -amount, acc.Credits-amount, ref, note); err != nil {
			return Charge{}, err
		}
		return Charge{amount, BalanceAccount}, l.write("charge", BalanceTenantReserved, t.ID, acc.ID, "", -amount, t.Reserved-amount, ref, note)
	}
	if t.Unmetered {
		res := tx.Model(&Tenant{}).Where("id = ? AND "+quotaOK, t.ID, month, amount).
			Updates(map[string]any{"used_month": usedExpr, "used_month_key": month})
		if res.Error != nil {
			return Charge{}, Internal("ledger: charge unmetered", res.Error)
		}
		if res.RowsAffected == 0 {
			return Charge{}, quotaErr()
		}
		return Charge{amount, ChargedUnmetered}, l.write("charge", BalanceTenantSpendable, t.ID, acc.ID, "", 0, t.Spendable, ref,
			fmt.Sprintf("unmetered: %d credits not deducted", amount))
	}
	res := tx.Model(&Tenant{}).Where("id = ? AND spendable >= ? AND "+quotaOK, t.ID, amount, month, amount).
		Updates(map[string]any{"spendable": gorm.Expr("spendable - ?", amount), "used_month": usedExpr, "used_month_key": month})
	if res.Error != nil {
		return Charge{}, Internal("ledger: charge tenant", res.Error)
	}
	if res.RowsAffected == 0 {
		t, err = findTenant(tx, t.ID)
		if err != nil {
			return Charge{}, err
		}
		if t.Spendable < amount {
			return Charge{}, insufficient(amount, t.Spendable)
		}
		return Charge{}, quotaErr()
	}
	t, err = findTenant(tx, t.ID)
	if err != nil {
		return Charge{}, err
	}
	return Charge{amount, BalanceTenantSpendable}, l.write("charge", BalanceTenantSpendable, t.ID, acc.ID, "", -amount, t.Spendable, ref, note)
}

// RefundTx returns exactly what a charge took, to where it came from. The caller guarantees "once"
// with a conditional update of the charged record in the same transaction.
func (a *App) RefundTx(tx *gorm.DB, tenantID, accountID, userID string, c Charge, ref, note string) error {
	if c.Amount <= 0 {
		return nil
	}
	l := a.newLedger(tx)
	month := monthKey(l.now)
	unuse := map[string]any{"used_month": gorm.Expr("CASE WHEN used_month_key = ? AND used_month >= ? THEN used_month - ? ELSE used_month END", month, c.Amount, c.Amount)}
	switch c.ChargedTo {
	case BalanceUser:
		if err := tx.Model(&User{}).Where("id = ?", userID).Update("credits", gorm.Expr("credits + ?", c.Amount)).Error; err != nil {
			return Internal("ledger: refund user", err)
		}
		var u User
		if err := tx.Select("credits").First(&u, "id = ?", userID).Error; err != nil {
			return Internal("ledger: refund user", err)
		}
		return l.write("refund", BalanceUser, "", "", userID, c.Amount, u.Credits, ref, note)
	case ChargedUnmetered:
		if err := tx.Model(&Tenant{}).Where("id = ?", tenantID).Updates(unuse).Error; err != nil {
			return Internal("ledger: refund unmetered", err)
		}
		t, err := findTenant(tx, tenantID)
		if err != nil {
			return err
		}
		return l.write("refund", BalanceTenantSpendable, tenantID, accountID, "", 0, t.Spendable, ref, fmt.Sprintf("unmetered: %d credits", c.Amount))
	case BalanceAccount:
		var acc Account
		if err := tx.First(&acc, "id = ?", accountID).Error; err != nil {
			return Internal("ledger: refund account", err)
		}
		if !acc.Shared {
			if err := tx.Model(&Account{}).Where("id = ?", acc.ID).Update("credits", gorm.Expr("credits + ?", c.Amount)).Error; err != nil {
				return Internal("ledger: refund account", err)
			}
			unuse["reserved"] = gorm.Expr("reserved + ?", c.Amount)
			if err := tx.Model(&Tenant{}).Where("id = ?", tenantID).Updates(unuse).Error; err != nil {
				return Internal("ledger: refund reserved", err)
			}
			t, err := findTenant(tx, tenantID)
			if err != nil {
				return err
			}
			if err := l.write("refund", BalanceAccount, tenantID, acc.ID, "", c.Amount, acc.Credits+c.Amount, ref, note); err != nil {
				return err
			}
			return l.write("refund", BalanceTenantReserved, tenantID, acc.ID, "", c.Amount, t.Reserved, ref, note)
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
		return l.write("refund", BalanceTenantSpendable, tenantID, accountID, "", c.Amount, t.Spendable, ref, note)
	}
	return Internal("ledger: refund", fmt.Errorf("unknown balance %q", c.ChargedTo))
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
func (a *App) CreditTenant(ctx context.Context, tenantID string, delta int64) (*Tenant, error) {
	if delta == 0 {
		return nil, Invalid("credits must be a non-zero integer")
	}
	var t *Tenant
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		if t, err = findTenant(tx, tenantID); err != nil {
			return err
		}
		if err := a.creditTenant(tx, t, delta, "admin_credit", "", "administrator credit"); err != nil {
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
func (a *App) CreditUser(ctx context.Context, userID string, delta int64, kind, ref, note string) (int64, error) {
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

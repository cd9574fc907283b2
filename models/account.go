package models

import (
	"context"
	"errors"
	"net/mail"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Member accounts of a tenant. Each has one account key, stored as a SHA-256 hash for lookup and as a
// sealed copy so that the tenant's listing can show it again. A shared member spends from the tenant's
// spendable pool; a dedicated member holds credits moved out of it into the tenant's reserved part.

// AccountView is a member account as its tenant sees it, with the plaintext key.
type AccountView struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
	Shared   bool   `json:"shared"`
	Credits  int64  `json:"credits"`
	Disabled bool   `json:"disabled"`
	// APIKey is nil when the sealed copy can no longer be opened (the service secret changed); rekey then.
	APIKey    *string   `json:"api_key"`
	CreatedAt time.Time `json:"created_at"`
}

// AccountInput is what a tenant gives to create a member account.
type AccountInput struct {
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
	// Shared selects shared mode; absent means shared unless Credits is given.
	Shared *bool `json:"shared"`
	// Credits are the dedicated credits to allocate from the tenant's spendable pool.
	Credits *int64 `json:"credits"`
}

// QuotaInput sets a member's quota mode absolutely: Shared true, or dedicated Credits.
type QuotaInput struct {
	Shared  *bool  `json:"shared"`
	Credits *int64 `json:"credits"`
}

// Accounts lists the tenant's member accounts, oldest first, with their plaintext keys.
func (acs *AccountService) Accounts(ctx context.Context, id *Identity) ([]AccountView, error) {
	a := acs.a
	if err := id.Require(CapManageMembers); err != nil {
		return nil, err
	}
	tenantID := id.TenantID
	db := a.DB.WithContext(ctx)
	var accs []Account
	if err := db.Where("tenant_id = ?", tenantID).Order("created_at, id").Find(&accs).Error; err != nil {
		return nil, Internal("account: list", err)
	}
	var keys []APIKey
	if err := db.Where("tenant_id = ? AND kind = ?", tenantID, "account").Find(&keys).Error; err != nil {
		return nil, Internal("account: list keys", err)
	}
	byAccount := make(map[string]*APIKey, len(keys))
	for i := range keys {
		if keys[i].AccountID != nil {
			byAccount[*keys[i].AccountID] = &keys[i]
		}
	}
	out := make([]AccountView, 0, len(accs))
	for _, acc := range accs {
		out = append(out, a.accountView(&acc, byAccount[acc.ID]))
	}
	return out, nil
}

// CreateAccount creates a member account of the tenant with its key: shared mode by default, dedicated
// when credits are given (at most the tenant's spendable credits, else 可分配积分不足).
func (acs *AccountService) CreateAccount(ctx context.Context, id *Identity, in AccountInput) (*AccountView, error) {
	a := acs.a
	if err := id.Require(CapManageMembers); err != nil {
		return nil, err
	}
	tenantID := id.TenantID
	email := NormalizeEmail(in.Email)
	if !validEmail(email) {
		return nil, Invalid("email must be a valid e-mail address such as name@example.com")
	}
	nickname := strings.TrimSpace(in.Nickname)
	if nickname == "" {
		nickname = email[:strings.LastIndexByte(email, '@')]
	}
	if len([]rune(nickname)) > 100 {
		return nil, Invalid("nickname must be at most 100 characters")
	}
	shared := in.Credits == nil
	if in.Shared != nil {
		if *in.Shared && in.Credits != nil {
			return nil, Invalid("send either shared: true or credits, not both")
		}
		shared = *in.Shared
	}
	var credits int64
	if in.Credits != nil {
		if *in.Credits < 0 {
			return nil, Invalid("credits must not be negative")
		}
		credits = *in.Credits
	}
	now := a.Now().UTC().Truncate(time.Microsecond) // what PostgreSQL stores: the create answer equals the listing
	acc := &Account{ID: NewID(), TenantID: tenantID, Email: email, Nickname: nickname, Shared: shared, CreatedAt: now, UpdatedAt: now}
	var key *APIKey
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if _, err := findTenant(tx, tenantID); err != nil {
			return err
		}
		if err := tx.Create(acc).Error; err != nil {
			return err
		}
		if !shared { // GORM writes the column default (true) for a false Shared on create
			if err := tx.Model(acc).Update("shared", false).Error; err != nil {
				return err
			}
		}
		var err error
		if key, _, err = a.issueAccountKey(tx, acc); err != nil {
			return err
		}
		if err := a.newLedger(tx).moveToAccount(tenantID, acc.ID, credits, "dedicated credits of a new member"); err != nil {
			return err
		}
		acc.Shared, acc.Credits = shared, credits
		return nil
	})
	if err != nil {
		return nil, asCoreError("account: create", err)
	}
	v := a.accountView(acc, key)
	return &v, nil
}

// SetAccountQuota sets a member's quota mode absolutely. Shared true returns its unspent dedicated
// credits to the tenant's spendable pool; Credits sets its dedicated credits, at most spendable plus
// its current dedicated credits (else 可分配积分不足), and a lower value returns the remainder.
func (acs *AccountService) SetAccountQuota(ctx context.Context, id *Identity, accountID string, in QuotaInput) (*AccountView, error) {
	a := acs.a
	if err := id.Require(CapManageMembers); err != nil {
		return nil, err
	}
	tenantID := id.TenantID
	switch {
	case in.Shared != nil && *in.Shared && in.Credits != nil:
		return nil, Invalid("send either shared: true or credits, not both")
	case in.Credits != nil && *in.Credits < 0:
		return nil, Invalid("credits must not be negative")
	case in.Credits == nil && (in.Shared == nil || !*in.Shared):
		return nil, Invalid("send shared: true for shared mode or credits for dedicated credits")
	}
	var acc *Account
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		if acc, err = lockAccount(tx, tenantID, accountID); err != nil {
			return err
		}
		current := int64(0)
		if !acc.Shared {
			current = acc.Credits
		}
		target, note := int64(0), "member moved to shared mode"
		if in.Credits != nil {
			target, note = *in.Credits, "dedicated credits set"
		}
		shared := in.Credits == nil
		if shared != acc.Shared {
			if err := tx.Model(&Account{}).Where("id = ?", acc.ID).Updates(map[string]any{"shared": shared, "updated_at": a.Now().UTC()}).Error; err != nil {
				return err
			}
		}
		if err := a.newLedger(tx).moveToAccount(tenantID, acc.ID, target-current, note); err != nil {
			return err
		}
		acc.Shared, acc.Credits = shared, target
		return nil
	})
	if err != nil {
		return nil, asCoreError("account: set quota", err)
	}
	return a.viewAccount(ctx, acc)
}

// RekeyAccount replaces a member's key and returns the new plaintext; the old key fails at once.
func (acs *AccountService) RekeyAccount(ctx context.Context, id *Identity, accountID string) (string, error) {
	a := acs.a
	if err := id.Require(CapManageMembers); err != nil {
		return "", err
	}
	tenantID := id.TenantID
	var key string
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		acc, err := lockAccount(tx, tenantID, accountID)
		if err != nil {
			return err
		}
		if err := tx.Where("account_id = ? AND kind = ?", acc.ID, "account").Delete(&APIKey{}).Error; err != nil {
			return err
		}
		_, key, err = a.issueAccountKey(tx, acc)
		return err
	})
	if err != nil {
		return "", asCoreError("account: rekey", err)
	}
	a.identityChanged(ctx, IdentityAccount, accountID)
	return key, nil
}

// ToggleAccount disables or enables a member account; a disabled member's key gets 401 until enabled.
func (acs *AccountService) ToggleAccount(ctx context.Context, id *Identity, accountID string, disabled bool) error {
	a := acs.a
	if err := id.Require(CapManageMembers); err != nil {
		return err
	}
	tenantID := id.TenantID
	if accountID == "" {
		return Invalid("account_id is required")
	}
	res := a.DB.WithContext(ctx).Model(&Account{}).Where("id = ? AND tenant_id = ?", accountID, tenantID).
		Updates(map[string]any{"disabled": disabled, "updated_at": a.Now().UTC()})
	if res.Error != nil {
		return Internal("account: toggle", res.Error)
	}
	if res.RowsAffected == 0 {
		return NotFound("member account")
	}
	a.identityChanged(ctx, IdentityAccount, accountID)
	return nil
}

// lockAccount reads a member account of the tenant and locks its row until the transaction ends; an
// unknown id or another tenant's account is not found.
func lockAccount(tx *gorm.DB, tenantID, accountID string) (*Account, error) {
	if accountID == "" {
		return nil, Invalid("account_id is required")
	}
	var acc Account
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).First(&acc, "id = ? AND tenant_id = ?", accountID, tenantID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("member account")
	}
	if err != nil {
		return nil, Internal("account: read", err)
	}
	return &acc, nil
}

// issueAccountKey stores a fresh account key, its hash for lookup and a sealed copy for the listing,
// and returns the row and the plaintext.
func (a *App) issueAccountKey(tx *gorm.DB, acc *Account) (*APIKey, string, error) {
	plain := NewAPIKey()
	k := &APIKey{ID: NewID(), Hash: HashKey(plain), Kind: "account", TenantID: acc.TenantID, AccountID: &acc.ID,
		Sealed: a.sealer.Seal(plain), CreatedAt: a.Now().UTC()}
	if err := tx.Create(k).Error; err != nil {
		return nil, "", err
	}
	return k, plain, nil
}

// viewAccount reads the account's key and returns its view.
func (a *App) viewAccount(ctx context.Context, acc *Account) (*AccountView, error) {
	var key APIKey
	err := a.DB.WithContext(ctx).Where("account_id = ? AND kind = ?", acc.ID, "account").First(&key).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Internal("account: read key", err)
	}
	v := a.accountView(acc, &key)
	return &v, nil
}

func (a *App) accountView(acc *Account, key *APIKey) AccountView {
	v := AccountView{ID: acc.ID, Email: acc.Email, Nickname: acc.Nickname, Shared: acc.Shared, Credits: acc.Credits,
		Disabled: acc.Disabled, CreatedAt: acc.CreatedAt.UTC()}
	if key != nil && key.Sealed != "" {
		if plain, err := a.sealer.Open(key.Sealed); err == nil {
			v.APIKey = &plain
		}
	}
	return v
}

// validEmail reports whether s is a bare e-mail address (no display name) of at most 320 characters.
func validEmail(s string) bool {
	if s == "" || len(s) > 320 || strings.ContainsAny(s, " \t\r\n<>") {
		return false
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	return at > 0 && strings.Contains(s[at+1:], ".")
}

// AccountService holds tenants, their member accounts, their settings, callbacks and reports.
type AccountService struct{ a *App }

// Accounts returns tenants and accounts.
func (a *App) Accounts() *AccountService { return a.svc.accounts }

package models_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gorm.io/gorm"

	"studio/models"
	"studio/models/metrics"
	"studio/models/modelstest"
)

func TestMain(m *testing.M) { modelstest.Main(m) }

func ptr[T any](v T) *T { return &v }

// newApp returns a core over a fresh database, with the default configuration.
func newApp(t *testing.T) *models.App {
	t.Helper()
	app, err := models.NewApp(context.Background(), modelstest.NewDB(t), models.DefaultConfig(), models.Deps{})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	return app
}

// newTenant creates a tenant with opening credits and returns its identity.
func newTenant(t *testing.T, app *models.App, in models.TenantInput) *models.Identity {
	t.Helper()
	if in.Name == "" {
		in.Name = "Acme"
	}
	ten, _, err := app.Accounts().CreateTenant(context.Background(), in)
	if err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return &models.Identity{Kind: models.IdentityTenant, TenantID: ten.ID}
}

// newMember creates a member account and returns its identity.
func newMember(t *testing.T, app *models.App, tenant *models.Identity, in models.AccountInput) *models.Identity {
	t.Helper()
	if in.Email == "" {
		in.Email = models.NewID()[:8] + "@example.com"
	}
	acc, err := app.Accounts().CreateAccount(context.Background(), tenant, in)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	return &models.Identity{Kind: models.IdentityAccount, TenantID: tenant.TenantID, AccountID: acc.ID}
}

// newUser creates a personal account holding credits (granted through the ledger).
func newUser(t *testing.T, app *models.App, credits int64) *models.Identity {
	t.Helper()
	u := models.User{ID: models.NewID(), Email: models.NewID()[:8] + "@example.com"}
	if err := app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if credits != 0 {
		if _, err := app.Credits().CreditUser(context.Background(), u.ID, credits, models.LedgerGrant, "", "test grant"); err != nil {
			t.Fatal(err)
		}
	}
	return &models.Identity{Kind: models.IdentityUser, UserID: u.ID}
}

func charge(app *models.App, id *models.Identity, amount int64) (models.Charge, error) {
	var c models.Charge
	err := app.Tx(context.Background(), func(tx *gorm.DB) error {
		var err error
		c, err = app.Credits().ChargeTx(tx, id, amount, "ref", "test")
		return err
	})
	return c, err
}

func pool(t *testing.T, app *models.App, tenant *models.Identity) *models.Tenant {
	t.Helper()
	ten, err := app.Accounts().TenantSettings(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return ten
}

func accountCredits(t *testing.T, app *models.App, id *models.Identity) int64 {
	t.Helper()
	var acc models.Account
	if err := app.DB.Gorm.First(&acc, "id = ?", id.AccountID).Error; err != nil {
		t.Fatal(err)
	}
	return acc.Credits
}

func userCredits(t *testing.T, app *models.App, id *models.Identity) int64 {
	t.Helper()
	var u models.User
	if err := app.DB.Gorm.First(&u, "id = ?", id.UserID).Error; err != nil {
		t.Fatal(err)
	}
	return u.Credits
}

// assertLedgerSound checks, independently of AuditLedger and then with it, that every balance equals the
// sum of its ledger rows, that reserved equals the dedicated credits, and that no balance went negative.
func assertLedgerSound(t *testing.T, app *models.App) {
	t.Helper()
	sum := func(where string, args ...any) int64 {
		var s int64
		if err := app.DB.Gorm.Model(&models.LedgerEntry{}).Where(where, args...).Select("COALESCE(SUM(delta), 0)").Scan(&s).Error; err != nil {
			t.Fatal(err)
		}
		return s
	}
	var tenants []models.Tenant
	var accounts []models.Account
	var users []models.User
	app.DB.Gorm.Find(&tenants)
	app.DB.Gorm.Find(&accounts)
	app.DB.Gorm.Find(&users)
	dedicated := map[string]int64{}
	for _, a := range accounts {
		if got := sum("balance = ? AND account_id = ?", models.BalanceAccount, a.ID); got != a.Credits {
			t.Errorf("account %s: credits %d, ledger sum %d", a.Nickname, a.Credits, got)
		}
		if a.Credits < 0 || (a.Shared && a.Credits != 0) {
			t.Errorf("account %s: shared %v with credits %d", a.Nickname, a.Shared, a.Credits)
		}
		if !a.Shared {
			dedicated[a.TenantID] += a.Credits
		}
	}
	for _, ten := range tenants {
		if got := sum("balance = ? AND tenant_id = ?", models.BalanceTenantSpendable, ten.ID); got != ten.Spendable {
			t.Errorf("tenant %s: spendable %d, ledger sum %d", ten.Name, ten.Spendable, got)
		}
		if got := sum("balance = ? AND tenant_id = ?", models.BalanceTenantReserved, ten.ID); got != ten.Reserved {
			t.Errorf("tenant %s: reserved %d, ledger sum %d", ten.Name, ten.Reserved, got)
		}
		if ten.Reserved != dedicated[ten.ID] {
			t.Errorf("tenant %s: reserved %d, sum of dedicated credits %d", ten.Name, ten.Reserved, dedicated[ten.ID])
		}
		if ten.Spendable < 0 || ten.Reserved < 0 {
			t.Errorf("tenant %s: negative pool %d/%d", ten.Name, ten.Spendable, ten.Reserved)
		}
	}
	for _, u := range users {
		if got := sum("balance = ? AND user_id = ?", models.BalanceUser, u.ID); got != u.Credits {
			t.Errorf("user %s: credits %d, ledger sum %d", u.Email, u.Credits, got)
		}
	}
	var negative int64
	app.DB.Gorm.Model(&models.LedgerEntry{}).Where("after < 0").Count(&negative)
	if negative != 0 {
		t.Errorf("%d ledger rows record a negative balance", negative)
	}
	problems, err := app.Credits().AuditLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("audit: %s", p)
	}
}

func TestChargeTakesFromTheRightBalance(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(100))})
	shared := newMember(t, app, tenant, models.AccountInput{})
	dedicated := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(30))})
	user := newUser(t, app, 5)
	steps := []struct {
		name      string
		id        *models.Identity
		amount    int64
		chargedTo string
		spendable int64
		reserved  int64
	}{
		{"tenant key spends spendable", tenant, 2, models.BalanceTenantSpendable, 68, 30},
		{"shared member spends spendable", shared, 3, models.BalanceTenantSpendable, 65, 30},
		{"dedicated member spends its credits", dedicated, 4, models.BalanceAccount, 65, 26},
		{"personal login spends its credits", user, 5, models.BalanceUser, 65, 26},
	}
	for _, s := range steps {
		c, err := charge(app, s.id, s.amount)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if c.Amount != s.amount || c.ChargedTo != s.chargedTo {
			t.Errorf("%s: charge = %+v, want %d to %s", s.name, c, s.amount, s.chargedTo)
		}
		p := pool(t, app, tenant)
		if p.Spendable != s.spendable || p.Reserved != s.reserved || p.Balance() != s.spendable+s.reserved {
			t.Errorf("%s: pool %d/%d, want %d/%d", s.name, p.Spendable, p.Reserved, s.spendable, s.reserved)
		}
	}
	if got := accountCredits(t, app, dedicated); got != 26 {
		t.Errorf("dedicated credits = %d, want 26", got)
	}
	if got := userCredits(t, app, user); got != 0 {
		t.Errorf("user credits = %d, want 0", got)
	}
	if _, err := charge(app, &models.Identity{Kind: models.IdentityAdmin}, 1); models.KindOf(err) != models.KindForbidden {
		t.Errorf("admin charge: %v, want forbidden", err)
	}
	if c, err := charge(app, tenant, 0); err != nil || c.Amount != 0 {
		t.Errorf("zero charge = %+v, %v", c, err)
	}
	assertLedgerSound(t, app)
}

func TestInsufficientCreditsDeductNothing(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(10))})
	shared := newMember(t, app, tenant, models.AccountInput{})
	dedicated := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(2))})
	user := newUser(t, app, 1)
	cases := []struct {
		name string
		id   *models.Identity
		need int64
		msg  string
	}{
		{"tenant", tenant, 9, "insufficient credits: need 9, have 8, missing 1"},
		{"shared member", shared, 20, "insufficient credits: need 20, have 8, missing 12"},
		{"dedicated member", dedicated, 3, "insufficient credits: need 3, have 2, missing 1"},
		{"personal login", user, 4, "insufficient credits: need 4, have 1, missing 3"},
	}
	for _, c := range cases {
		_, err := charge(app, c.id, c.need)
		if models.KindOf(err) != models.KindInsufficientCredits || err.Error() != c.msg {
			t.Errorf("%s: got %v, want %q", c.name, err, c.msg)
		}
	}
	p := pool(t, app, tenant)
	if p.Spendable != 8 || p.Reserved != 2 || accountCredits(t, app, dedicated) != 2 || userCredits(t, app, user) != 1 {
		t.Errorf("something was deducted: pool %d/%d", p.Spendable, p.Reserved)
	}
	var charges int64
	app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ?", models.LedgerCharge).Count(&charges)
	if charges != 0 {
		t.Errorf("%d charge rows after refused charges", charges)
	}
	assertLedgerSound(t, app)
}

func TestDedicatedChargeRefusedByQuotaLeavesMemberWhole(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(50)), QuotaMonthly: ptr(int64(3))})
	dedicated := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(10))})
	// Without rolling back: the ledger must not leave the member deducted even if the caller goes on.
	err := app.Tx(context.Background(), func(tx *gorm.DB) error {
		if _, err := app.Credits().ChargeTx(tx, dedicated, 4, "", ""); models.KindOf(err) != models.KindInsufficientCredits {
			t.Errorf("charge above quota: %v, want insufficient credits", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := accountCredits(t, app, dedicated); got != 10 {
		t.Errorf("member credits = %d after a refused charge, want 10", got)
	}
	assertLedgerSound(t, app)
}

func TestUnmeteredAndMonthlyQuota(t *testing.T) {
	app := newApp(t)
	now := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC) // 23:00 in Shanghai, last day of November
	app.Now = func() time.Time { return now }
	tenant := newTenant(t, app, models.TenantInput{Unmetered: true, QuotaMonthly: ptr(int64(5))})
	c, err := charge(app, tenant, 4)
	if err != nil || c.ChargedTo != models.ChargedUnmetered {
		t.Fatalf("unmetered charge = %+v, %v", c, err)
	}
	if p := pool(t, app, tenant); p.Spendable != 0 || p.UsedMonth != 4 {
		t.Fatalf("unmetered pool: spendable %d used %d, want 0 and 4", p.Spendable, p.UsedMonth)
	}
	_, err = charge(app, tenant, 2)
	if models.KindOf(err) != models.KindInsufficientCredits {
		t.Fatalf("charge above the monthly quota: %v", err)
	}
	if err := app.Tx(context.Background(), func(tx *gorm.DB) error {
		return app.Credits().RefundTx(tx, tenant.TenantID, "", "", c, "ref", "refund")
	}); err != nil {
		t.Fatal(err)
	}
	if p := pool(t, app, tenant); p.UsedMonth != 0 {
		t.Fatalf("used_month after refund = %d, want 0", p.UsedMonth)
	}
	if _, err := charge(app, tenant, 5); err != nil {
		t.Fatalf("charge up to the quota: %v", err)
	}
	now = now.Add(2 * time.Hour) // 01:00 on 1 December in Shanghai: a new month
	if _, err := charge(app, tenant, 5); err != nil {
		t.Fatalf("charge in a new local month: %v", err)
	}
	if p := pool(t, app, tenant); p.UsedMonth != 5 || p.UsedMonthKey != "2026-12" {
		t.Fatalf("new month: used %d key %s", p.UsedMonth, p.UsedMonthKey)
	}
	assertLedgerSound(t, app)
}

func TestRefundReturnsToWhereItCameFrom(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(100))})
	dedicated := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(20))})
	user := newUser(t, app, 10)
	refund := func(id *models.Identity, c models.Charge) {
		t.Helper()
		if err := app.Tx(ctx, func(tx *gorm.DB) error {
			return app.Credits().RefundTx(tx, id.TenantID, id.AccountID, id.UserID, c, "ref", "refund")
		}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := charge(app, dedicated, 5)
	refund(dedicated, c)
	if got, p := accountCredits(t, app, dedicated), pool(t, app, tenant); got != 20 || p.Reserved != 20 || p.Spendable != 80 {
		t.Errorf("dedicated refund: credits %d, pool %d/%d", got, p.Spendable, p.Reserved)
	}
	c, _ = charge(app, user, 4)
	refund(user, c)
	if got := userCredits(t, app, user); got != 10 {
		t.Errorf("user refund: %d, want 10", got)
	}
	// A member charged in dedicated mode and moved to shared since: the refund goes to the pool.
	c, _ = charge(app, dedicated, 6)
	if _, err := app.Accounts().SetAccountQuota(ctx, tenant, dedicated.AccountID, models.QuotaInput{Shared: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if p := pool(t, app, tenant); p.Spendable != 94 || p.Reserved != 0 {
		t.Fatalf("after moving to shared: pool %d/%d, want 94/0", p.Spendable, p.Reserved)
	}
	refund(dedicated, c)
	if got, p := accountCredits(t, app, dedicated), pool(t, app, tenant); got != 0 || p.Spendable != 100 || p.Reserved != 0 {
		t.Errorf("refund after moving to shared: credits %d, pool %d/%d", got, p.Spendable, p.Reserved)
	}
	err := app.Tx(ctx, func(tx *gorm.DB) error {
		return app.Credits().RefundTx(tx, tenant.TenantID, "", "", models.Charge{Amount: 1, ChargedTo: "nowhere"}, "", "")
	})
	if err == nil {
		t.Error("refund to an unknown balance succeeded")
	}
	assertLedgerSound(t, app)
}

func TestAllocationWritesOneLedgerTransaction(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(40))})
	member := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(15))})
	var rows []models.LedgerEntry
	app.DB.Gorm.Where("kind = ?", models.LedgerAllocate).Order("id").Find(&rows)
	if len(rows) != 3 {
		t.Fatalf("allocate rows = %d, want 3", len(rows))
	}
	want := map[string]struct{ delta, after int64 }{
		models.BalanceAccount:         {15, 15},
		models.BalanceTenantReserved:  {15, 15},
		models.BalanceTenantSpendable: {-15, 25},
	}
	for _, r := range rows {
		w := want[r.Balance]
		if r.TxID != rows[0].TxID || r.Delta != w.delta || r.After != w.after || r.AccountID == nil || *r.AccountID != member.AccountID {
			t.Errorf("allocate row %s: delta %d after %d tx %s", r.Balance, r.Delta, r.After, r.TxID)
		}
	}
	if _, err := app.Accounts().SetAccountQuota(context.Background(), tenant, member.AccountID, models.QuotaInput{Credits: ptr(int64(5))}); err != nil {
		t.Fatal(err)
	}
	var release []models.LedgerEntry
	app.DB.Gorm.Where("kind = ?", models.LedgerRelease).Find(&release)
	if len(release) != 3 {
		t.Fatalf("release rows = %d, want 3", len(release))
	}
	assertLedgerSound(t, app)
}

// refundConcurrently runs refund from n goroutines at once and returns how many reported a refund.
func refundConcurrently(t *testing.T, app *models.App, n int, refund func(tx *gorm.DB) (bool, error)) int64 {
	t.Helper()
	var done atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := app.Tx(context.Background(), func(tx *gorm.DB) error {
				ok, err := refund(tx)
				if ok {
					done.Add(1)
				}
				return err
			})
			if err != nil {
				t.Errorf("refund: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return done.Load()
}

func TestRefundJobOnceUnderConcurrency(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(10))})
	member := newMember(t, app, tenant, models.AccountInput{Credits: ptr(int64(5))})
	for _, id := range []*models.Identity{tenant, member} {
		c, err := charge(app, id, 2)
		if err != nil {
			t.Fatal(err)
		}
		job := models.Job{ID: models.NewID(), TenantID: &id.TenantID, Status: "failed", Credits: c.Amount, ChargedTo: c.ChargedTo}
		if id.AccountID != "" {
			job.AccountID = &id.AccountID
		}
		if err := app.DB.Gorm.Create(&job).Error; err != nil {
			t.Fatal(err)
		}
		n := refundConcurrently(t, app, 10, func(tx *gorm.DB) (bool, error) {
			j := job
			return app.Credits().RefundJobTx(tx, &j)
		})
		if n != 1 {
			t.Errorf("%s: %d refunds of one job, want 1", id.Kind, n)
		}
	}
	if p := pool(t, app, tenant); p.Spendable != 5 || p.Reserved != 5 || accountCredits(t, app, member) != 5 {
		t.Errorf("after refunds: pool %d/%d, member %d; want 5/5 and 5", p.Spendable, p.Reserved, accountCredits(t, app, member))
	}
	var refunds int64
	app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ?", models.LedgerRefund).Count(&refunds)
	if refunds != 3 { // tenant: spendable; member: account and reserved
		t.Errorf("refund rows = %d, want 3", refunds)
	}
	assertLedgerSound(t, app)
}

func TestRefundVideoOnceUnderConcurrency(t *testing.T) {
	app := newApp(t)
	user := newUser(t, app, 12)
	c, err := charge(app, user, 10)
	if err != nil {
		t.Fatal(err)
	}
	task := models.VideoTask{ID: models.NewID(), UserID: &user.UserID, Status: "cancelled", Model: "vidB-H3", Resolution: "720p",
		Duration: 5, Credits: c.Amount, ChargedTo: c.ChargedTo}
	if err := app.DB.Gorm.Create(&task).Error; err != nil {
		t.Fatal(err)
	}
	n := refundConcurrently(t, app, 10, func(tx *gorm.DB) (bool, error) {
		v := task
		return app.Credits().RefundVideoTx(tx, &v)
	})
	if n != 1 || userCredits(t, app, user) != 12 {
		t.Errorf("%d refunds, credits %d; want 1 and 12", n, userCredits(t, app, user))
	}
	var stored models.VideoTask
	app.DB.Gorm.First(&stored, "id = ?", task.ID)
	if stored.RefundedAt == nil {
		t.Error("refunded_at not set")
	}
	assertLedgerSound(t, app)
}

func TestConcurrentLedgerPostgres(t *testing.T) {
	modelstest.RequirePostgres(t)
	runConcurrentLedger(t, 200, 50, 100)
}

func TestConcurrentLedgerSmall(t *testing.T) {
	runConcurrentLedger(t, 40, 10, 40)
}

// runConcurrentLedger fires charges parallel 1-credit charges against a pool of pool credits, then
// mixed parallel movements, and checks that nothing overspends and the ledger matches every balance.
func runConcurrentLedger(t *testing.T, charges, poolCredits, mixed int) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(poolCredits))})
	var accepted, refused atomic.Int64
	parallel(charges, func(int) {
		_, err := charge(app, tenant, 1)
		switch {
		case err == nil:
			accepted.Add(1)
		case models.KindOf(err) == models.KindInsufficientCredits:
			refused.Add(1)
		default:
			t.Errorf("charge: %v", err)
		}
	})
	if accepted.Load() != int64(poolCredits) || refused.Load() != int64(charges-poolCredits) {
		t.Fatalf("accepted %d, refused %d; want %d and %d", accepted.Load(), refused.Load(), poolCredits, charges-poolCredits)
	}
	if p := pool(t, app, tenant); p.Spendable != 0 || p.Reserved != 0 {
		t.Fatalf("pool after the rush: %d/%d, want 0/0", p.Spendable, p.Reserved)
	}
	assertLedgerSound(t, app)

	if _, err := app.Credits().CreditTenant(ctx, tenant.TenantID, 300); err != nil {
		t.Fatal(err)
	}
	shared := newMember(t, app, tenant, models.AccountInput{Nickname: "shared"})
	d1 := newMember(t, app, tenant, models.AccountInput{Nickname: "d1", Credits: ptr(int64(40))})
	d2 := newMember(t, app, tenant, models.AccountInput{Nickname: "d2", Credits: ptr(int64(20))})
	user := newUser(t, app, 30)
	expected := func(err error) bool {
		var e *models.Error
		return err == nil || (errors.As(err, &e) && (e.Kind == models.KindInsufficientCredits ||
			(e.Kind == models.KindInvalid && e.Message == models.InsufficientAllocatableMessage) || e.Kind == models.KindConflict))
	}
	var succeeded [8]atomic.Int64
	parallel(mixed, func(i int) {
		var err error
		switch i % 8 {
		case 0:
			_, err = charge(app, tenant, rand.Int64N(3)+1)
		case 1:
			_, err = charge(app, shared, rand.Int64N(3)+1)
		case 2:
			_, err = charge(app, d1, rand.Int64N(5)+1)
		case 3:
			_, err = app.Accounts().SetAccountQuota(ctx, tenant, d1.AccountID, models.QuotaInput{Credits: ptr(rand.Int64N(60))})
		case 4:
			in := models.QuotaInput{Shared: ptr(true)}
			if i%16 == 4 {
				in = models.QuotaInput{Credits: ptr(rand.Int64N(40))}
			}
			_, err = app.Accounts().SetAccountQuota(ctx, tenant, d2.AccountID, in)
		case 5:
			var c models.Charge
			if c, err = charge(app, d2, 2); err == nil {
				err = app.Tx(ctx, func(tx *gorm.DB) error {
					return app.Credits().RefundTx(tx, tenant.TenantID, d2.AccountID, "", c, "ref", "refund")
				})
			}
		case 6:
			_, err = charge(app, user, rand.Int64N(3)+1)
		case 7:
			_, err = app.Accounts().CreateAccount(ctx, tenant, models.AccountInput{Email: models.NewID()[:8] + "@example.com", Credits: ptr(int64(5))})
		}
		if !expected(err) {
			t.Errorf("operation %d: %v", i%8, err)
		}
		if err == nil {
			succeeded[i%8].Add(1)
		}
	})
	for op := range succeeded {
		if succeeded[op].Load() == 0 {
			t.Errorf("operation %d never succeeded: the mix did not exercise it", op)
		}
	}
	assertLedgerSound(t, app)
}

// parallel runs fn(0..n-1) in n goroutines released at once and waits for all of them.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// Every charge's ledger row carries the balance the charge left, whichever way it went: the pool of a
// metered tenant, an unmetered tenant (nothing deducted), a shared member, a dedicated member.
func TestChargeRowsCarryTheBalanceAfter(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	metered := newTenant(t, app, models.TenantInput{Credits: ptr(int64(10))})
	unmetered := newTenant(t, app, models.TenantInput{Name: "Free", Credits: ptr(int64(4)), Unmetered: true})
	shared := newMember(t, app, metered, models.AccountInput{Shared: ptr(true)})
	var ref string
	charge := func(id *models.Identity, amount int64) models.Charge {
		t.Helper()
		var c models.Charge
		ref = models.NewID()
		err := app.Tx(ctx, func(tx *gorm.DB) error {
			var err error
			c, err = app.Credits().ChargeTx(tx, id, amount, ref, "test")
			return err
		})
		if err != nil {
			t.Fatalf("charge %d: %v", amount, err)
		}
		return c
	}
	last := func(tenantID string) models.LedgerEntry {
		t.Helper()
		var e models.LedgerEntry
		if err := app.DB.Gorm.Where("tenant_id = ? AND kind = ?", tenantID, models.LedgerCharge).Order("id DESC").First(&e).Error; err != nil {
			t.Fatal(err)
		}
		return e
	}
	charged := func() float64 {
		var m dto.Metric
		if err := metrics.Credits.WithLabelValues(models.LedgerCharge).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	before, start := charged(), time.Now()
	if c := charge(metered, 3); c.ChargedTo != models.BalanceTenantSpendable {
		t.Fatalf("charged to %s", c.ChargedTo)
	}
	e := last(metered.TenantID)
	if e.Delta != -3 || e.After != 7 || e.Balance != models.BalanceTenantSpendable || e.AccountID != nil || e.UserID != nil {
		t.Fatalf("pool charge row: %s delta %d after %d account %v user %v, want tenant_spendable -3 after 7", e.Balance, e.Delta, e.After, e.AccountID, e.UserID)
	}
	if e.Ref != ref || e.Note != "test" || len(e.TxID) != 36 || e.At.Before(start.Add(-time.Second)) || e.At.After(time.Now().Add(time.Second)) {
		t.Fatalf("pool charge row: ref %q note %q tx %q at %s", e.Ref, e.Note, e.TxID, e.At)
	}
	if got := charged() - before; got != 3 {
		t.Fatalf("credits charged metric grew by %v, want 3", got)
	}
	charge(shared, 2)
	if e := last(metered.TenantID); e.Delta != -2 || e.After != 5 || e.AccountID == nil || *e.AccountID != shared.AccountID {
		t.Fatalf("shared member row: delta %d after %d account %v", e.Delta, e.After, e.AccountID)
	}
	if c := charge(unmetered, 50); c.ChargedTo != models.ChargedUnmetered {
		t.Fatalf("unmetered charged to %s", c.ChargedTo)
	}
	if e := last(unmetered.TenantID); e.Delta != 0 || e.After != 4 {
		t.Fatalf("unmetered row: delta %d after %d, want 0 after 4", e.Delta, e.After)
	}
	if got := charged() - before; got != 5 {
		t.Fatalf("credits charged metric grew by %v, want 5 (3 + 2; nothing for the unmetered tenant)", got)
	}
	if ten, _ := app.Accounts().TenantSettings(ctx, unmetered); ten.Spendable != 4 {
		t.Fatalf("unmetered spendable = %d, want 4", ten.Spendable)
	}
	err := app.Tx(ctx, func(tx *gorm.DB) error {
		_, err := app.Credits().ChargeTx(tx, metered, 6, models.NewID(), "test")
		return err
	})
	if models.KindOf(err) != models.KindInsufficientCredits || err.Error() != "insufficient credits: need 6, have 5, missing 1" {
		t.Fatalf("over the balance: %v", err)
	}
	if bad, err := app.Credits().AuditLedger(ctx); err != nil || len(bad) > 0 {
		t.Fatalf("audit: %v %v", bad, err)
	}
}

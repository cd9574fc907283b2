package models

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"studio/models/pglisten"
)

// IdentityKind names who is calling.
type IdentityKind string

// The identities of spec section 5, plus the platform administrator.
const (
	IdentityTenant  IdentityKind = "tenant"
	IdentityAccount IdentityKind = "account"
	IdentityUser    IdentityKind = "user"
	IdentityAdmin   IdentityKind = "admin"
)

// Identity is the resolved caller that every handler receives.
type Identity struct {
	Kind      IdentityKind
	TenantID  string // tenant and account identities
	AccountID string // account identity
	UserID    string // personal login
	Agent     string // X-CS-Agent of an assistant sharing a tenant key
	Binding   string // the tenant's binding (tenant and account identities); cached with the identity, evicted by BindTenant
}

// Owner returns a stable key naming the identity, for rate limits and ownership.
func (id *Identity) Owner() string {
	switch id.Kind {
	case IdentityAccount:
		return "account:" + id.AccountID
	case IdentityUser:
		return "user:" + id.UserID
	case IdentityTenant:
		return "tenant:" + id.TenantID
	}
	return "admin"
}

// is reports whether the identity is one of kinds; the permission table (capability.go) is its only user:
// the rest of the code asks May or Require.
func (id *Identity) is(kinds ...IdentityKind) bool {
	for _, k := range kinds {
		if id.Kind == k {
			return true
		}
	}
	return false
}

var errBadCredential = Unauthenticated("invalid API key")

// ResolveIdentity turns a credential (API key or personal-login JWT) into an Identity.
// A missing or unknown credential is KindUnauthenticated.
//
// Resolved tenant keys, member keys and personal logins are served from the identity cache (see "The
// identity cache" below), so that a busy relay does not read the database on every request; a rekey,
// a disable or a tenant rekey evicts them on every replica at once. The caller may change the
// returned Identity (it is a copy).
func (au *AuthService) ResolveIdentity(ctx context.Context, credential string) (*Identity, error) {
	a := au.a
	credential = strings.TrimSpace(credential)
	if credential == "" {
		return nil, Unauthenticated("missing credentials: send X-API-Key or Authorization: Bearer")
	}
	if !strings.HasPrefix(credential, KeyPrefix) {
		return a.identityFromLogin(credential)
	}
	if !ValidKeyFormat(credential) {
		return nil, errBadCredential
	}
	return a.identityFromKeyHash(ctx, HashKey(credential))
}

// identityFromKey resolves the hash of a well-formed key from the database.
func (a *App) identityFromKey(ctx context.Context, hash string) (*Identity, error) {
	if a.isAdminHash(ctx, hash) {
		return &Identity{Kind: IdentityAdmin}, nil
	}
	var key APIKey
	err := a.DB.WithContext(ctx).Where("hash = ?", hash).First(&key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errBadCredential
	}
	if err != nil {
		return nil, Internal("identity: look up key", err)
	}
	// The lookup is by hash; compare again in constant time so that timing never depends on the key.
	if !EqualHash(key.Hash, hash) {
		return nil, errBadCredential
	}
	switch key.Kind {
	case "tenant":
		binding, err := a.tenantBinding(ctx, key.TenantID)
		if err != nil {
			return nil, err
		}
		return &Identity{Kind: IdentityTenant, TenantID: key.TenantID, Binding: binding}, nil
	case "account":
		var acc Account
		if err := a.DB.WithContext(ctx).First(&acc, "id = ?", *key.AccountID).Error; err != nil {
			return nil, errBadCredential
		}
		if acc.Disabled {
			return nil, Unauthenticated("this member account is disabled; ask the tenant administrator to enable it")
		}
		binding, err := a.tenantBinding(ctx, acc.TenantID)
		if err != nil {
			return nil, err
		}
		return &Identity{Kind: IdentityAccount, TenantID: acc.TenantID, AccountID: acc.ID, Binding: binding}, nil
	}
	return nil, errBadCredential
}

// tenantBinding reads the binding of a key's tenant, which travels with the identity.
func (a *App) tenantBinding(ctx context.Context, tenantID string) (string, error) {
	var t Tenant
	err := a.DB.WithContext(ctx).Select("binding").First(&t, "id = ?", tenantID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", errBadCredential
	}
	if err != nil {
		return "", Internal("identity: read tenant", err)
	}
	return t.Binding, nil
}

// identityFromLogin resolves a personal-login JWT. The signature, audience and expiry are checked by
// identityFromToken on a miss; a cached login is used only until the token's own expiry (read from the
// token just verified), so that an expired login is refused exactly as without the cache.
func (a *App) identityFromLogin(token string) (*Identity, error) {
	key := "login:" + HashKey(token)
	cache := a.identities()
	if e, ok := cache.get(key); ok && a.Now().Before(e.loginExpires) {
		id := e.id
		return &id, nil
	}
	epoch := cache.epochNow()
	id, err := a.identityFromToken(token)
	if err != nil {
		return nil, err
	}
	var claims jwt.RegisteredClaims
	if _, _, perr := jwt.NewParser().ParseUnverified(token, &claims); perr == nil && claims.ExpiresAt != nil {
		cache.put(epoch, key, cachedIdentity{id: *id, loginExpires: claims.ExpiresAt.Time})
	}
	return id, nil
}

func (a *App) isAdminHash(ctx context.Context, hash string) bool {
	if a.Config.AdminKey != "" {
		return EqualHash(HashKey(a.Config.AdminKey), hash)
	}
	stored, err := a.setting(ctx, "admin_key_hash")
	return err == nil && stored != "" && EqualHash(stored, hash)
}

// The identity cache.
//
// Authenticating from the database on every request puts a read (on SQLite, the one connection) on the
// hot path of the chat relay. The cache keeps resolved identities in memory, keyed by the SHA-256 of the
// credential, for at most IdentityCacheTTL. Changes that invalidate a credential (a tenant rekey, a
// member rekey, a member disable) call identityChanged after they commit: it evicts the affected entries
// here at once and, on PostgreSQL, announces the change with NOTIFY on AuthChannel. Every replica
// listens on that channel on its one listener connection (models/pglisten, shared with the event
// broker) and evicts the same entries when the notice arrives; while that connection is down the cache
// is bypassed and emptied, and it is emptied again on reconnection, because notices sent in between are
// lost. On SQLite there is one server process and
// local eviction is enough; a change committed by another process (the `studio admin` command) empties
// the cache within sqliteWatchInterval. A fill that raced an eviction (it read the database before the
// change committed) is dropped, so that a stale identity is never stored after its eviction.

// IdentityCacheTTL bounds how long a cached identity is trusted: a safety net, since changes evict it.
const IdentityCacheTTL = 30 * time.Second

// AuthChannel is the PostgreSQL notification channel on which credential changes are announced; the
// payload is "tenant:<id>", "account:<id>" or "user:<id>", optionally followed by ":<nonce>".
const AuthChannel = "studio_auth"

// maxCachedIdentities bounds the cache; past it, expired entries go, and if none had, all.
const maxCachedIdentities = 100_000

// identityCheckInterval is how often a following cache checks that its App's database is still open (it
// then gives its listener back); it also checks when the listener's connection is lost.
const identityCheckInterval = 5 * time.Second

// identityCache is the cache of one App.
type identityCache struct {
	app      *App
	listener *pglisten.Listener // PostgreSQL: the one it follows AuthChannel on (nil on SQLite)
	lost     chan struct{}      // signalled when the listener's connection is lost
	mu       sync.RWMutex
	entries  map[string]cachedIdentity
	epoch    uint64                   // incremented by every eviction, under mu
	live     atomic.Bool              // entries may be served and stored: always on SQLite, while listening on PostgreSQL
	echoes   map[string]chan struct{} // announcements of this process awaiting their own notice, by nonce
	ready    chan struct{}
	once     sync.Once // closes ready
	start    sync.Once // starts following changes
}

// cachedIdentity is one cache entry.
type cachedIdentity struct {
	id           Identity
	expires      time.Time // wall clock: the TTL is an operational bound, independent of a.Now
	loginExpires time.Time // personal logins: the token's expiry, compared with a.Now
}

// identityCaches holds the cache of each App; App has no field for it.
var identityCaches sync.Map // *App -> *identityCache

// identities returns the App's identity cache, starting it on first use.
func (a *App) identities() *identityCache {
	c := a.identityCacheOf()
	c.start.Do(c.follow)
	return c
}

// identityCacheOf returns the App's identity cache, making it on the first call (NewApp's): on
// PostgreSQL it is then registered on AuthChannel of the listener (Deps.Listener, or one of its own),
// before anything starts a shared listener; it starts the listener itself on first use (follow).
func (a *App) identityCacheOf() *identityCache {
	if c, ok := identityCaches.Load(a); ok {
		return c.(*identityCache)
	}
	fresh := &identityCache{app: a, entries: map[string]cachedIdentity{}, echoes: map[string]chan struct{}{},
		ready: make(chan struct{}), lost: make(chan struct{}, 1)}
	if a.DB.Dialect == Postgres {
		if fresh.listener = a.deps.Listener; fresh.listener == nil {
			fresh.listener = NewListener(a.DB, pglisten.Options{})
		}
	}
	v, loaded := identityCaches.LoadOrStore(a, fresh)
	c := v.(*identityCache)
	if loaded || c.listener == nil {
		return c
	}
	c.listener.Handle(AuthChannel, pglisten.Handler{
		Notify: func(n *pgconn.Notification) { c.evict(n.Payload) },
		// Notices sent while nobody listened are lost: start from an empty cache.
		Connected: func(context.Context) { c.clear(); c.goLive() },
		// Until the listener is back, authenticate from the database.
		Lost: func() {
			c.live.Store(false)
			c.clear()
			select {
			case c.lost <- struct{}{}: // follow checks at once whether the database was closed
			default:
			}
		},
	})
	return c
}

// IdentityCacheReady waits until the identity cache serves entries: at once on SQLite, on PostgreSQL
// once its listener follows credential changes. Requests are served (from the database) before it.
func (au *AuthService) IdentityCacheReady(ctx context.Context) error {
	a := au.a
	select {
	case <-a.identities().ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get returns a fresh entry.
func (c *identityCache) get(key string) (cachedIdentity, bool) {
	if !c.live.Load() {
		return cachedIdentity{}, false
	}
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.expires) {
		return cachedIdentity{}, false
	}
	return e, true
}

// epochNow returns the eviction count; take it before reading the database and pass it to put.
func (c *identityCache) epochNow() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// put stores an entry read from the database, unless an eviction happened since epoch was taken.
func (c *identityCache) put(epoch uint64, key string, e cachedIdentity) {
	if !c.live.Load() {
		return
	}
	e.expires = time.Now().Add(IdentityCacheTTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if len(c.entries) >= maxCachedIdentities {
		now := time.Now()
		for k, old := range c.entries {
			if now.After(old.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedIdentities {
			c.entries = map[string]cachedIdentity{}
		}
	}
	c.entries[key] = e
}

// evict removes the entries of the identities a change notice names ("kind:id", optionally followed by
// ":nonce" when this process waits for its own notice); anything else empties the cache.
func (c *identityCache) evict(notice string) {
	kind, rest, ok := strings.Cut(notice, ":")
	id, nonce, _ := strings.Cut(rest, ":")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if ch, waiting := c.echoes[nonce]; waiting && nonce != "" {
		close(ch)
		delete(c.echoes, nonce)
	}
	if !ok || id == "" {
		c.entries = map[string]cachedIdentity{}
		return
	}
	for k, e := range c.entries {
		if (kind == string(IdentityTenant) && e.id.TenantID == id) ||
			(kind == string(IdentityAccount) && e.id.AccountID == id) ||
			(kind == string(IdentityUser) && e.id.UserID == id) {
			delete(c.entries, k)
		}
	}
}

// clear removes every entry.
func (c *identityCache) clear() { c.evict("") }

// goLive lets the cache serve entries and wakes IdentityCacheReady.
func (c *identityCache) goLive() {
	c.live.Store(true)
	c.once.Do(func() { close(c.ready) })
}

// echoWait bounds how long an announcement waits for its own notice to come back.
const echoWait = time.Second

// identityChanged makes every replica forget the cached identities of a tenant (kind tenant: its
// tenant key and member keys), a member account or a personal account at once. Call it after the
// change committed. On PostgreSQL it returns once this process's own listener has received the notice
// (PostgreSQL signals every listening session at the same moment, so the other replicas have it too),
// waiting at most echoWait. A failed announcement is retried briefly and then logged: the change
// stands, and other replicas then drop the entries within IdentityCacheTTL at the latest.
func (a *App) identityChanged(ctx context.Context, kind IdentityKind, id string) {
	scope := string(kind) + ":" + id
	var cache *identityCache
	if c, ok := identityCaches.Load(a); ok {
		cache = c.(*identityCache)
		cache.evict(scope)
	}
	if a.DB.Dialect != Postgres {
		return
	}
	notice, echo := scope, (chan struct{})(nil)
	if cache != nil && cache.live.Load() {
		nonce := RandomString(16, keyAlphabet)
		notice, echo = scope+":"+nonce, make(chan struct{})
		cache.mu.Lock()
		cache.echoes[nonce] = echo
		cache.mu.Unlock()
		defer func() {
			cache.mu.Lock()
			delete(cache.echoes, nonce)
			cache.mu.Unlock()
		}()
	}
	ctx = context.WithoutCancel(ctx)
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 {
			time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		}
		if err = a.DB.WithContext(ctx).Exec("SELECT pg_notify(?, ?)", AuthChannel, notice).Error; err == nil {
			break
		}
	}
	if err != nil {
		slog.Error("identity: unable to announce a credential change to other replicas; they drop it within the cache TTL",
			"scope", scope, "ttl", IdentityCacheTTL, "err", err)
		return
	}
	if echo != nil {
		select {
		case <-echo:
		case <-time.After(echoWait):
		}
	}
}

// follow starts following credential changes: the listener on PostgreSQL, held until the App's
// database is closed. On SQLite the server is the only process that changes credentials, so its own
// evictions are enough; a watcher still empties the cache when another process (`studio admin` run
// against the same file) commits to the database.
func (c *identityCache) follow() {
	if c.listener == nil {
		c.goLive()
		go c.watchOtherProcesses()
		return
	}
	release := c.listener.Start()
	go func() {
		t := time.NewTicker(identityCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-c.lost:
			}
			if databaseClosed(c.app.DB) {
				release()
				return
			}
		}
	}()
}

// sqliteWatchInterval is how often the SQLite watcher asks whether another process wrote.
const sqliteWatchInterval = 250 * time.Millisecond

// watchOtherProcesses empties the cache whenever PRAGMA data_version changes, which SQLite does when
// another connection (another process: this one has a single connection) commits, until the App's
// database is closed.
func (c *identityCache) watchOtherProcesses() {
	var last int64 = -1
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var v int64
		err := c.app.DB.SQL.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
		cancel()
		switch {
		case err != nil && strings.Contains(err.Error(), "database is closed"):
			return
		case err == nil && v != last:
			if last >= 0 {
				c.clear()
			}
			last = v
		}
		time.Sleep(sqliteWatchInterval)
	}
}

// databaseClosed reports whether db was closed (database/sql has no exported error for it).
func databaseClosed(db *DB) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := db.SQL.PingContext(ctx)
	return err != nil && strings.Contains(err.Error(), "database is closed")
}

// Operator is the identity of whoever runs `studio admin` on the service's machine (with the database's
// address and the service secret): the platform administrator.
func Operator() *Identity { return &Identity{Kind: IdentityAdmin} }

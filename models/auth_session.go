package models

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
)

// Browser sessions of personal accounts.
const (
	// SessionTTL is the validity of a browser session.
	SessionTTL = 12 * time.Hour
	// SessionCookie names the cookie of a browser session.
	SessionCookie = "studio_session"
)

// StartUserSession creates a browser session for a personal account and returns the cookie value.
func (au *AuthService) StartUserSession(ctx context.Context, userID string) (string, error) {
	a := au.a
	value := RandomString(43, keyAlphabet)
	now := a.Now()
	uid := userID
	s := Session{ID: HashKey(value), Kind: string(IdentityUser), UserID: &uid, CSRF: RandomString(32, keyAlphabet),
		ExpiresAt: now.Add(SessionTTL), CreatedAt: now}
	if err := a.DB.WithContext(ctx).Create(&s).Error; err != nil {
		return "", Internal("session: create", err)
	}
	return value, nil
}

// SessionUser returns the personal account of a valid browser-session cookie; anything else is KindUnauthenticated.
func (au *AuthService) SessionUser(ctx context.Context, cookie string) (*User, error) {
	a := au.a
	if cookie == "" {
		return nil, Unauthenticated("not signed in")
	}
	var s Session
	err := a.DB.WithContext(ctx).First(&s, "id = ?", HashKey(cookie)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && (s.UserID == nil || !a.Now().Before(s.ExpiresAt))) {
		return nil, Unauthenticated("not signed in")
	}
	if err != nil {
		return nil, Internal("session: look up", err)
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", *s.UserID).Error; err != nil || u.Disabled {
		return nil, Unauthenticated("not signed in")
	}
	return &u, nil
}

// EndSession deletes a browser session.
func (au *AuthService) EndSession(ctx context.Context, cookie string) error {
	a := au.a
	if err := a.DB.WithContext(ctx).Delete(&Session{}, "id = ?", HashKey(cookie)).Error; err != nil {
		return Internal("session: delete", err)
	}
	return nil
}

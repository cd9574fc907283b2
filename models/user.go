package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"gorm.io/gorm"
)

// LoginTTL is the validity of a personal-login JWT (spec section 8).
const LoginTTL = 7 * 24 * time.Hour

type loginClaims struct {
	jwt.RegisteredClaims
}

// IssueUserToken signs a personal-login JWT for the user, valid for ttl.
func (a *App) IssueUserToken(userID string, ttl time.Duration) (string, time.Time, error) {
	now := a.Now()
	exp := now.Add(ttl)
	claims := loginClaims{jwt.RegisteredClaims{
		Subject:   userID,
		Issuer:    "studio",
		Audience:  jwt.ClaimStrings{"studio-login"},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
		ID:        NewID(),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.jwtKey())
	if err != nil {
		return "", time.Time{}, fmt.Errorf("login: sign token: %w", err)
	}
	return tok, exp, nil
}

func (a *App) jwtKey() []byte { return Sign(a.Secret, "jwt", nil) }

func (a *App) identityFromToken(token string) (*Identity, error) {
	var claims loginClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) { return a.jwtKey(), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("studio-login"), jwt.WithIssuer("studio"),
		jwt.WithTimeFunc(a.Now), jwt.WithExpirationRequired())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, Unauthenticated("login expired: sign in again with `studio login`")
		}
		return nil, errBadCredential
	}
	var u User
	err = a.DB.First(&u, "id = ?", claims.Subject).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && u.Disabled) {
		return nil, errBadCredential
	}
	if err != nil {
		return nil, Internal("identity: look up user", err)
	}
	return &Identity{Kind: IdentityUser, UserID: u.ID}, nil
}

// UserByEmail returns the personal account with that e-mail.
func (a *App) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u User
	err := a.DB.WithContext(ctx).First(&u, "email = ?", NormalizeEmail(email)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("user")
	}
	if err != nil {
		return nil, Internal("user: by email", err)
	}
	return &u, nil
}

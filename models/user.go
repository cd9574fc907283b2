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
	// Version is the account's TokenVersion when the token was issued; a token of an older version has
	// ended (endUserLoginsTx). Tokens issued before versions existed carry none, which reads as 0.
	Version int64 `json:"ver,omitempty"`
}

// IssueUserToken signs a personal-login JWT for the user, valid for ttl, carrying the account's current
// token version.
func (au *AuthService) IssueUserToken(userID string, ttl time.Duration) (string, time.Time, error) {
	a := au.a
	var u User
	if err := a.DB.Gorm.Select("id, token_version").First(&u, "id = ?", userID).Error; err != nil {
		return "", time.Time{}, fmt.Errorf("login: read token version: %w", err)
	}
	return a.issueUserToken(&u, ttl)
}

// issueUserToken signs a personal-login JWT for u at u.TokenVersion, valid for ttl.
func (a *App) issueUserToken(u *User, ttl time.Duration) (string, time.Time, error) {
	userID := u.ID
	now := a.Now()
	exp := now.Add(ttl)
	claims := loginClaims{jwt.RegisteredClaims{
		Subject:   userID,
		Issuer:    "studio",
		Audience:  jwt.ClaimStrings{"studio-login"},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
		ID:        NewID(),
	}, u.TokenVersion}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.jwtKey())
	if err != nil {
		return "", time.Time{}, fmt.Errorf("login: sign token: %w", err)
	}
	return tok, exp, nil
}

func (a *App) jwtKey() []byte { return Sign(a.secret, "jwt", nil) }

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
	err = a.DB.Gorm.First(&u, "id = ?", claims.Subject).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && u.Disabled) {
		return nil, errBadCredential
	}
	if err != nil {
		return nil, Internal("identity: look up user", err)
	}
	if claims.Version != u.TokenVersion {
		return nil, errLoginEnded
	}
	return &Identity{Kind: IdentityUser, UserID: u.ID}, nil
}

// errLoginEnded refuses a login token that an account's later password change or reset has ended.
var errLoginEnded = Unauthenticated("this login has ended (the account's password was set or reset since): sign in again with the e-mail and password, or with a code e-mailed to the address")

// endUserLoginsTx ends every login of the account: its login tokens (the version they carry is raised),
// its console sessions, and its device logins approved but not yet collected. Call userLoginsEnded after
// the transaction commits, so that no replica keeps serving a cached token.
func endUserLoginsTx(tx *gorm.DB, userID string) error {
	if err := tx.Model(&User{}).Where("id = ?", userID).Update("token_version", gorm.Expr("token_version + 1")).Error; err != nil {
		return Internal("logins: end tokens", err)
	}
	if err := tx.Where("user_id = ?", userID).Delete(&Session{}).Error; err != nil {
		return Internal("logins: end sessions", err)
	}
	err := tx.Model(&DeviceAuthorization{}).Where("user_id = ? AND status = ?", userID, DeviceApproved).
		Updates(map[string]any{"status": DeviceDenied, "user_id": nil}).Error
	if err != nil {
		return Internal("logins: end device logins", err)
	}
	return nil
}

// userLoginsEnded makes every replica forget the cached logins of the account (after endUserLoginsTx).
func (a *App) userLoginsEnded(ctx context.Context, userID string) {
	a.identityChanged(ctx, IdentityUser, userID)
}

// UserByEmail returns the personal account with that e-mail.
func (acs *AccountService) UserByEmail(ctx context.Context, email string) (*User, error) {
	a := acs.a
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

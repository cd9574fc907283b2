package models

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// Password login, password change and first password of a personal account.

// dummyHash is compared against when the e-mail is unknown, so that a login takes as long either way.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("studio: no such account"), bcrypt.DefaultCost)
	return h
})

var errWrongLogin = Unauthenticated("wrong e-mail or password")

// Authenticate checks an e-mail and password and returns the user; any mismatch is the same
// KindUnauthenticated error, after the same bcrypt work. Attempts are limited per e-mail and address.
func (au *AuthService) Authenticate(ctx context.Context, rawEmail, password, clientAddr string) (*User, error) {
	a := au.a
	email := NormalizeEmail(rawEmail)
	if email == "" || password == "" {
		return nil, Invalid("email and password are required")
	}
	if len(email) > maxEmailLen || len(password) > 4*MaxPasswordBytes {
		return nil, errWrongLogin // no account has such an address or password; nothing is counted or stored
	}
	if err := a.countAttempt(ctx, "login", email, clientAddr); err != nil {
		return nil, err
	}
	var u User
	err := a.DB.WithContext(ctx).First(&u, "email = ?", email).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Internal("login: look up user", err)
	}
	hash := []byte(u.PasswordHash)
	if err != nil || len(hash) == 0 {
		hash = dummyHash()
	}
	match := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if err != nil || u.PasswordHash == "" || !match || u.Disabled {
		return nil, errWrongLogin
	}
	return &u, nil
}

// Login checks an e-mail and password and returns a 7-day login token.
func (au *AuthService) Login(ctx context.Context, email, password, clientAddr string) (*LoginResult, error) {
	a := au.a
	u, err := a.Auth().Authenticate(ctx, email, password, clientAddr)
	if err != nil {
		return nil, err
	}
	return a.loginResult(u)
}

// ChangePassword replaces a personal account's password after checking the old one. An account made by
// third-party sign-in or by a claim redemption has no password yet and sets its first one with an empty
// old password.
func (au *AuthService) ChangePassword(ctx context.Context, id *Identity, oldPassword, newPassword string) error {
	a := au.a
	if err := id.Require(CapOwnAccount); err != nil {
		return err
	}
	userID := id.UserID
	if err := validPassword("new_password", newPassword); err != nil {
		return err
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", userID).Error; err != nil {
		return Internal("password: look up user", err)
	}
	if u.PasswordHash != "" || oldPassword != "" {
		old := []byte(u.PasswordHash)
		if len(old) == 0 {
			old = dummyHash()
		}
		if bcrypt.CompareHashAndPassword(old, []byte(oldPassword)) != nil || u.PasswordHash == "" {
			return Forbidden("old_password is wrong")
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), bcrypt.DefaultCost)
	if err != nil {
		return Internal("password: hash", err)
	}
	// The old password was checked outside the transaction (bcrypt is slow); the store is conditional on
	// the hash it was checked against. A first password ends every earlier login of the account (D8: the
	// token a redemption gave ends when the password is set).
	first := u.PasswordHash == ""
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := storePasswordTx(tx, &u, hash, a.Now()); err != nil || !first {
			return err
		}
		return endUserLoginsTx(tx, u.ID)
	})
	if err == nil && first {
		a.userLoginsEnded(ctx, u.ID)
	}
	return err
}

// SetFirstPassword gives the personal account behind a personal-login token (the token a claim
// redemption returns) its first password, so that its owner signs in later with the e-mail and the
// password: console sign-in, device approval, POST /api/auth/login. The password follows the rules of
// registration (at least MinPasswordLength characters, at most 72 bytes). A token that is not a
// personal login is KindUnauthenticated; a disabled account KindForbidden; an account that has a
// password already KindConflict (it changes it with the old one, POST /api/auth/password). Setting it
// ends the token and every other login of the account (D8): the owner signs in with the password.
func (au *AuthService) SetFirstPassword(ctx context.Context, loginToken, password string) (*User, error) {
	a := au.a
	id, err := a.Auth().ResolveIdentity(ctx, loginToken)
	if err != nil {
		return nil, err
	}
	if id.Kind != IdentityUser {
		return nil, Unauthenticated("a password is set with the login token of a personal account")
	}
	if err := validPassword("password", password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("password: hash", err)
	}
	var u User
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.First(&u, "id = ?", id.UserID).Error; err != nil {
			return Internal("password: look up user", err)
		}
		if u.Disabled {
			return errUserDisabled
		}
		if u.PasswordHash != "" {
			return errPasswordSet
		}
		if err := storePasswordTx(tx, &u, hash, a.Now()); err != nil {
			return err
		}
		return endUserLoginsTx(tx, u.ID)
	})
	if err != nil {
		return nil, err
	}
	a.userLoginsEnded(ctx, u.ID)
	return &u, nil
}

// errPasswordSet refuses a first password for an account that has one.
var errPasswordSet = Conflict("this account has a password already: sign in with it, or change it with the old one (POST /api/auth/password)")

// storePasswordTx replaces u's password hash by hash, provided it is still the one u was read with;
// a concurrent change is KindConflict.
func storePasswordTx(tx *gorm.DB, u *User, hash []byte, now time.Time) error {
	res := tx.Model(&User{}).Where("id = ? AND password_hash = ?", u.ID, u.PasswordHash).
		Updates(map[string]any{"password_hash": string(hash), "updated_at": now})
	if res.Error != nil {
		return Internal("password: store", res.Error)
	}
	if res.RowsAffected != 1 {
		return Conflict("the password was changed meanwhile: try again")
	}
	u.PasswordHash = string(hash)
	return nil
}

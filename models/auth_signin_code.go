package models

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// Sign-in by e-mailed code: the way back in for an account without a password or with a forgotten one.

// signInCodeHash binds a sign-in code to its address; its own purpose keeps it from registering.
func (a *App) signInCodeHash(email, code string) string {
	return hex.EncodeToString(Sign(a.secret, "signin-code", []byte(email+"\n"+code)))
}

// maxCodeAttempts is how many wrong sign-in codes an address takes: each wrong code counts against every
// live code of the address, and a code counted this often is spent (a new one must be asked for).
const maxCodeAttempts = 5

// SendSignInCode e-mails a six-digit code with which the personal account of the e-mail sets a new
// password (ResetPassword): the way back in for an account that has no password (a buyer who redeemed
// a claim code and did not set one) or forgot it. Requests are limited like registration codes. The
// answer and the work are the same for every address, so that the form tells nobody which addresses
// have accounts: a code is stored and one e-mail is queued either way, the code to an account that can
// sign in, a "no account can sign in with this address" note otherwise (its code is never sent). The
// e-mail leaves through the queue, after the request.
func (au *AuthService) SendSignInCode(ctx context.Context, rawEmail, clientAddr string) error {
	a := au.a
	email, err := checkEmail(rawEmail)
	if err != nil {
		return err
	}
	code := RandomString(6, "0123456789")
	now := a.Now()
	var send func(context.Context) error
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "signin-code/email", "email:"+email, registerCodePerEmail); err != nil {
			return err
		}
		if err := a.limitSubject(tx, "signin-code/address", "addr:"+clientAddr, registerCodePerAddress); err != nil {
			return err
		}
		var users []User
		if err := tx.Select("id, disabled").Where("email = ?", email).Limit(1).Find(&users).Error; err != nil {
			return Internal("sign-in code: look up e-mail", err)
		}
		row := EmailCode{ID: NewID(), Email: email, CodeHash: a.signInCodeHash(email, code), ClientIP: clientAddr,
			ExpiresAt: now.Add(EmailCodeTTL), CreatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return Internal("sign-in code: store", err)
		}
		subject, body := "Your studio sign-in code: "+code, fmt.Sprintf("Your studio sign-in code is %s\n\n您的 studio 登录验证码是 %s\n\n"+
			"Enter it on the sign-in page to set a new password. It is valid for %d minutes and can be used once.\n"+
			"If you did not ask for it, ignore this e-mail: your password stays as it is.\n", code, code, int(EmailCodeTTL.Minutes()))
		if len(users) == 0 || users[0].Disabled {
			subject, body = "studio sign-in", fmt.Sprintf("Someone asked for a studio sign-in code for this address, "+
				"but no studio account can sign in with it.\n\n没有可以用此邮箱登录的 studio 账号。\n\n"+
				"If you redeemed a claim code, use the e-mail you redeemed it with. To open an account, ask your provider "+
				"for an invitation (%s/login).\nIf you did not ask for this, ignore this e-mail.\n", a.Config.BaseURL)
		}
		send, err = a.queueMailTx(tx, email, subject, body)
		return err
	})
	if err != nil {
		return err
	}
	return send(ctx)
}

// ResetPassword sets a new password for the personal account of the e-mail with a code SendSignInCode
// e-mailed to it; the code is consumed in the transaction that stores the password, and every earlier
// login of the account ends (its tokens, console sessions and device logins), so that the owner of the
// address can always take the account back. The password lockout of Authenticate does not apply here
// (an attacker's wrong passwords must not keep the owner out) and is lifted on success: wrong codes are
// bounded per code instead (maxCodeAttempts), and attempts per client address as logins are. A wrong,
// expired, spent or used code is KindInvalid, a disabled account KindForbidden.
func (au *AuthService) ResetPassword(ctx context.Context, rawEmail, code, newPassword, clientAddr string) (*User, error) {
	a := au.a
	email, err := checkEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	code = strings.TrimSpace(code)
	if code == "" {
		return nil, Invalid("code is required: the six-digit code e-mailed to %s", email)
	}
	if len(code) > 16 {
		return nil, errWrongSignInCode(email)
	}
	if err := validPassword("password", newPassword); err != nil {
		return nil, err
	}
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		return a.limitSubject(tx, "signin-verify/address", "addr:"+clientAddr, attemptsPerAddress)
	})
	if err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("password: hash", err)
	}
	var u User
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.consumeSignInCodeTx(tx, email, code); err != nil {
			return err
		}
		err := tx.First(&u, "email = ?", email).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return errWrongSignInCode(email) // a code stored for an address without an account is never sent
		}
		if err != nil {
			return Internal("password: look up user", err)
		}
		if u.Disabled {
			return errUserDisabled
		}
		if err := storePasswordTx(tx, &u, hash, a.Now()); err != nil {
			return err
		}
		if err := endUserLoginsTx(tx, u.ID); err != nil {
			return err
		}
		return a.clearSubjectTx(tx, "login/email", "email:"+email)
	})
	if KindOf(err) == KindInvalid && !errors.Is(err, errCodeSpent) {
		a.countWrongSignInCode(ctx, email)
	}
	if err != nil {
		return nil, err
	}
	a.userLoginsEnded(ctx, u.ID)
	return &u, nil
}

// errWrongSignInCode is the answer to a code that opens nothing.
func errWrongSignInCode(email string) error {
	return Invalid("wrong sign-in code: use the latest code e-mailed to %s, or ask for a new one", email)
}

// errCodeSpent refuses every code of an address that took maxCodeAttempts wrong ones.
var errCodeSpent = Invalid("too many wrong codes: ask for a new sign-in code")

// consumeSignInCodeTx marks a live sign-in code of email used; a wrong one is KindInvalid.
func (a *App) consumeSignInCodeTx(tx *gorm.DB, email, code string) error {
	now := a.Now()
	var live []EmailCode
	err := tx.Where("email = ? AND used_at IS NULL AND expires_at > ?", email, now).Order("created_at DESC").Find(&live).Error
	if err != nil {
		return Internal("sign-in code: look up", err)
	}
	want := a.signInCodeHash(email, code)
	spent := len(live) > 0
	for _, row := range live {
		if row.Attempts < maxCodeAttempts {
			spent = false
		}
		if !EqualHash(row.CodeHash, want) {
			continue
		}
		if row.Attempts >= maxCodeAttempts {
			return errCodeSpent
		}
		return useEmailCodeTx(tx, row.ID, now)
	}
	if spent {
		return errCodeSpent
	}
	return errWrongSignInCode(email)
}

// countWrongSignInCode counts a wrong code against every live code of the address, in a transaction of
// its own (the refused one rolled back).
func (a *App) countWrongSignInCode(ctx context.Context, email string) {
	err := a.DB.WithContext(ctx).Model(&EmailCode{}).Where("email = ? AND used_at IS NULL AND expires_at > ?", email, a.Now()).
		Update("attempts", gorm.Expr("attempts + 1")).Error
	if err != nil {
		slog.WarnContext(ctx, "sign-in code: count a wrong code", "err", err)
	}
}

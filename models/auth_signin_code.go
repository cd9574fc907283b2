package models

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// Sign-in by e-mailed code: the way back in for an account without a password or with a forgotten one.

// signInCodeHash binds a sign-in code to its address; its own purpose keeps it from registering.
func (a *App) signInCodeHash(email, code string) string {
	return hex.EncodeToString(Sign(a.Secret, "signin-code", []byte(email+"\n"+code)))
}

// SendSignInCode e-mails a six-digit code with which the personal account of the e-mail sets a new
// password (ResetPassword): the way back in for an account that has no password (a buyer who redeemed
// a claim code and did not set one) or forgot it. Requests are limited like registration codes. An
// address without an account, or with a disabled one, gets no e-mail and the same answer, so that the
// form does not tell which addresses have accounts.
func (a *App) SendSignInCode(ctx context.Context, rawEmail, clientAddr string) error {
	email, err := checkEmail(rawEmail)
	if err != nil {
		return err
	}
	code := RandomString(6, "0123456789")
	now := a.Now()
	send := false
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "signin-code/email", "email:"+email, registerCodePerEmail); err != nil {
			return err
		}
		if err := a.limitSubject(tx, "signin-code/address", "addr:"+clientAddr, registerCodePerAddress); err != nil {
			return err
		}
		var u User
		err := tx.Select("id, disabled").Where("email = ?", email).Take(&u).Error
		if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && u.Disabled) {
			return nil
		}
		if err != nil {
			return Internal("sign-in code: look up e-mail", err)
		}
		row := EmailCode{ID: NewID(), Email: email, CodeHash: a.signInCodeHash(email, code), ClientIP: clientAddr,
			ExpiresAt: now.Add(EmailCodeTTL), CreatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return Internal("sign-in code: store", err)
		}
		send = true
		return nil
	})
	if err != nil || !send {
		return err
	}
	body := fmt.Sprintf("Your studio sign-in code is %s\n\n您的 studio 登录验证码是 %s\n\nEnter it on the sign-in page to set a new password. "+
		"It is valid for %d minutes and can be used once.\nIf you did not ask for it, ignore this e-mail: your password stays as it is.\n",
		code, code, int(EmailCodeTTL.Minutes()))
	return a.SendMail(ctx, email, "Your studio sign-in code: "+code, body)
}

// ResetPassword sets a new password for the personal account of the e-mail with a code SendSignInCode
// e-mailed to it; the code is consumed in the transaction that stores the password. Attempts are
// limited per e-mail and address as logins are. A wrong, expired or used code is KindInvalid, a
// disabled account KindForbidden.
func (a *App) ResetPassword(ctx context.Context, rawEmail, code, newPassword, clientAddr string) (*User, error) {
	email, err := checkEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	code = strings.TrimSpace(code)
	if code == "" {
		return nil, Invalid("code is required: the six-digit code e-mailed to %s", email)
	}
	if err := validPassword("password", newPassword); err != nil {
		return nil, err
	}
	if err := a.countAttempt(ctx, "login", email, clientAddr); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("password: hash", err)
	}
	var u User
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.consumeEmailCodeTx(tx, email, a.signInCodeHash(email, code)); err != nil {
			return err
		}
		if err := tx.First(&u, "email = ?", email).Error; err != nil {
			return Internal("password: look up user", err)
		}
		if u.Disabled {
			return errUserDisabled
		}
		return storePasswordTx(tx, &u, hash, a.Now())
	})
	if err != nil {
		return nil, err
	}
	return &u, nil
}

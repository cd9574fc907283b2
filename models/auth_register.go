package models

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// Registration of a personal account by e-mail code and platform invitation.

// RegisterInput is the body of POST /api/auth/register.
type RegisterInput struct {
	Email          string `json:"email"`
	Password       string `json:"password"`
	Code           string `json:"code"`
	InvitationCode string `json:"invitation_code"`
	Nickname       string `json:"nickname"`
}

// emailCodeHash binds a registration code to its address under the service secret.
func (a *App) emailCodeHash(email, code string) string {
	return hex.EncodeToString(Sign(a.secret, "email-code", []byte(email+"\n"+code)))
}

// SendRegistrationCode e-mails a six-digit code for registering email. It is limited per e-mail address
// and per client address. The answer and the work are the same whether the address has an account or
// not, so that the form does not tell which addresses have accounts: both store a code and queue one
// e-mail, the code to a new address, a "you already have an account" note to a known one (whose code is
// never sent). The e-mail leaves through the queue, after the request.
func (au *AuthService) SendRegistrationCode(ctx context.Context, rawEmail, clientAddr string) error {
	a := au.a
	email, err := checkEmail(rawEmail)
	if err != nil {
		return err
	}
	code := RandomString(6, "0123456789")
	now := a.Now()
	var send func(context.Context) error
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "register-code/email", "email:"+email, registerCodePerEmail); err != nil {
			return err
		}
		if err := a.limitSubject(tx, "register-code/address", "addr:"+clientAddr, registerCodePerAddress); err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&User{}).Where("email = ?", email).Count(&n).Error; err != nil {
			return Internal("register: look up e-mail", err)
		}
		if err := tx.Where("expires_at < ?", now.Add(-24*time.Hour)).Delete(&EmailCode{}).Error; err != nil {
			return Internal("register: prune codes", err)
		}
		row := EmailCode{ID: NewID(), Email: email, CodeHash: a.emailCodeHash(email, code), ClientIP: clientAddr,
			ExpiresAt: now.Add(EmailCodeTTL), CreatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return Internal("register: store code", err)
		}
		subject, body := "Your studio registration code: "+code, fmt.Sprintf("Your studio registration code is %s\n\n"+
			"It is valid for %d minutes and can be used once.\nIf you did not ask for it, ignore this e-mail.\n",
			code, int(EmailCodeTTL.Minutes()))
		if n > 0 {
			subject, body = "You already have a studio account", fmt.Sprintf("Someone asked to register a studio account "+
				"for this address, which has one already.\n\n此邮箱已有 studio 账号。\n\nSign in with your password at %s/login, "+
				"or ask for a sign-in code there (%s/login/code) if you have no password or forgot it.\n"+
				"If you did not ask for this, ignore this e-mail: nothing has changed.\n", a.Config.BaseURL, a.Config.BaseURL)
		}
		send, err = a.queueMailTx(tx, email, subject, body)
		return err
	})
	if err != nil {
		return err
	}
	return send(ctx)
}

// consumeInvitationTx marks an unused invitation code used by userID; an unknown or used code is KindInvalid.
func (a *App) consumeInvitationTx(tx *gorm.DB, code, userID string) error {
	res := tx.Model(&Invitation{}).Where("code = ? AND used_by IS NULL", code).
		Updates(map[string]any{"used_by": userID, "used_at": a.Now()})
	if res.Error != nil {
		return Internal("register: use invitation", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var n int64
	if err := tx.Model(&Invitation{}).Where("code = ?", code).Count(&n).Error; err != nil {
		return Internal("register: look up invitation", err)
	}
	if n > 0 {
		return Invalid("this invitation code was already used")
	}
	return Invalid("unknown invitation code")
}

// Register creates a personal account from an e-mail code, a platform invitation and a password, and
// signs it in. The code and the invitation are consumed in the transaction that creates the user.
func (au *AuthService) Register(ctx context.Context, in RegisterInput, clientAddr string) (*LoginResult, error) {
	a := au.a
	email, err := checkEmail(in.Email)
	if err != nil {
		return nil, err
	}
	if err := validPassword("password", in.Password); err != nil {
		return nil, err
	}
	code := strings.TrimSpace(in.Code)
	if code == "" {
		return nil, Invalid("code is required: the six-digit code e-mailed by POST /api/auth/register/code")
	}
	invitation := strings.TrimSpace(in.InvitationCode)
	if invitation == "" {
		return nil, Invalid("invitation_code is required: registration by e-mail needs a platform invitation")
	}
	nickname := strings.TrimSpace(in.Nickname)
	if nickname == "" {
		nickname = email[:strings.IndexByte(email, '@')]
	}
	if utf8.RuneCountInString(nickname) > 100 {
		return nil, Invalid("nickname must be at most 100 characters")
	}
	if err := a.countAttempt(ctx, "register", email, clientAddr); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(in.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("register: hash password", err)
	}
	now := a.Now()
	u := User{ID: NewID(), Email: email, Nickname: nickname, PasswordHash: string(hash), CreatedAt: now, UpdatedAt: now}
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		// The code first: only the owner of the address holds a valid one, so whether the address has an
		// account is told to nobody else.
		if err := a.consumeEmailCodeTx(tx, email, a.emailCodeHash(email, code)); err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&User{}).Where("email = ?", email).Count(&n).Error; err != nil {
			return Internal("register: look up e-mail", err)
		}
		if n > 0 {
			return Conflict("an account with this e-mail already exists: sign in instead")
		}
		if err := a.consumeInvitationTx(tx, invitation, u.ID); err != nil {
			return err
		}
		if err := tx.Create(&u).Error; err != nil {
			if isUniqueViolation(err) {
				return Conflict("an account with this e-mail already exists: sign in instead")
			}
			return Internal("register: create user", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a.loginResult(&u)
}

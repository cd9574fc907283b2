package models

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Device authorization (RFC 8628): `studio login` on a device, approved by a person in a browser.

// Limits of device authorization.
const (
	// DeviceCodeTTL is how long a device authorization waits for approval.
	DeviceCodeTTL = 10 * time.Minute
	// DeviceInterval is the polling interval, in seconds, given to a device at the start.
	DeviceInterval = 5
	// deviceSlowDown is the interval increase of each slow_down answer (RFC 8628 section 3.5).
	deviceSlowDown = 5

	devicesPerAddress = 60 // device authorizations started per client address and hour
)

// The RFC 8628 and RFC 6749 error codes of the device token endpoint; each is a KindInvalid error whose
// message is the code itself, so that the body is {"error": "<code>"}.
const (
	DeviceAuthorizationPending = "authorization_pending"
	DeviceSlowDown             = "slow_down"
	DeviceExpiredToken         = "expired_token"
	DeviceAccessDenied         = "access_denied"
	DeviceInvalidGrant         = "invalid_grant"
)

// Statuses of a DeviceAuthorization.
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceDenied   = "denied"
	DeviceConsumed = "consumed"
)

// userCodeAlphabet has no vowels (no words) and no look-alike letters, per RFC 8628 section 6.1.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// DeviceStart is the answer of POST /api/auth/device.
type DeviceStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// DeviceToken is the successful answer of POST /api/auth/device/token.
type DeviceToken struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// DeviceVerificationPath is where a person approves a device, under SERVICE_BASE_URL.
const DeviceVerificationPath = "/device"

// NormalizeUserCode turns what a person typed ("abcd efgh", "ABCDEFGH") into the stored form ABCD-EFGH.
func NormalizeUserCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	c := b.String()
	if len(c) != 8 {
		return c
	}
	return c[:4] + "-" + c[4:]
}

// StartDeviceAuthorization creates a device authorization waiting for a person's approval.
func (au *AuthService) StartDeviceAuthorization(ctx context.Context, clientAddr string) (*DeviceStart, error) {
	a := au.a
	deviceCode := RandomString(43, keyAlphabet)
	now := a.Now()
	var userCode string
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "device/address", "addr:"+clientAddr, devicesPerAddress); err != nil {
			return err
		}
		if err := tx.Where("expires_at < ?", now.Add(-time.Hour)).Delete(&DeviceAuthorization{}).Error; err != nil {
			return Internal("device: prune", err)
		}
		for range 5 {
			userCode = NormalizeUserCode(RandomString(8, userCodeAlphabet))
			var n int64
			if err := tx.Model(&DeviceAuthorization{}).Where("user_code = ?", userCode).Count(&n).Error; err != nil {
				return Internal("device: check user code", err)
			}
			if n == 0 {
				row := DeviceAuthorization{DeviceCodeHash: HashKey(deviceCode), UserCode: userCode, Status: DevicePending,
					Interval: DeviceInterval, ExpiresAt: now.Add(DeviceCodeTTL), CreatedAt: now}
				if err := tx.Create(&row).Error; err != nil {
					return Internal("device: create", err)
				}
				return nil
			}
		}
		return Internal("device: user code", errors.New("no free user code after 5 draws"))
	})
	if err != nil {
		return nil, err
	}
	uri := a.Config.BaseURL + DeviceVerificationPath
	return &DeviceStart{DeviceCode: deviceCode, UserCode: userCode, VerificationURI: uri,
		VerificationURIComplete: uri + "?user_code=" + url.QueryEscape(userCode),
		ExpiresIn:               int(DeviceCodeTTL.Seconds()), Interval: DeviceInterval}, nil
}

// PendingDevice returns the device authorization of a user code while it waits for a decision.
func (au *AuthService) PendingDevice(ctx context.Context, userCode string) (*DeviceAuthorization, error) {
	a := au.a
	var d DeviceAuthorization
	err := a.DB.WithContext(ctx).First(&d, "user_code = ?", NormalizeUserCode(userCode)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("code")
	}
	if err != nil {
		return nil, Internal("device: look up", err)
	}
	switch {
	case !a.Now().Before(d.ExpiresAt):
		return nil, Invalid("this code has expired: run `studio login` again")
	case d.Status != DevicePending:
		return nil, Conflict("this code was already used")
	}
	return &d, nil
}

// DecideDevice approves the device authorization of a user code on behalf of a personal account, or
// denies it (denying needs no account: whoever holds the code may refuse it).
func (au *AuthService) DecideDevice(ctx context.Context, userCode, userID string, approve bool) error {
	a := au.a
	update := map[string]any{"status": DeviceDenied, "user_id": nil}
	if approve {
		if userID == "" {
			return Unauthenticated("sign in to approve")
		}
		update = map[string]any{"status": DeviceApproved, "user_id": userID}
	}
	code := NormalizeUserCode(userCode)
	res := a.DB.WithContext(ctx).Model(&DeviceAuthorization{}).
		Where("user_code = ? AND status = ? AND expires_at > ?", code, DevicePending, a.Now()).Updates(update)
	if res.Error != nil {
		return Internal("device: decide", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	_, err := a.Auth().PendingDevice(ctx, code)
	if err == nil {
		err = Conflict("this code was already used")
	}
	return err
}

// deviceError is the RFC error of the device token endpoint: HTTP 400 with {"error": code}.
func deviceError(code string) *Error { return &Error{Kind: KindInvalid, Message: code} }

// PollDeviceToken answers a device's poll: the 7-day login token once approved (once only), otherwise the
// RFC 8628 error. Polling sooner than the interval answers slow_down and adds 5 s to the interval.
func (au *AuthService) PollDeviceToken(ctx context.Context, deviceCode string) (*DeviceToken, error) {
	a := au.a
	if deviceCode == "" {
		return nil, Invalid("device_code is required")
	}
	var userID, answer string
	// The transaction commits the poll time and interval also when the answer is an RFC error.
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var d DeviceAuthorization
		err := tx.First(&d, "device_code_hash = ?", HashKey(deviceCode)).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return deviceError(DeviceInvalidGrant)
		}
		if err != nil {
			return Internal("device: look up", err)
		}
		now := a.Now()
		switch {
		case d.Status == DeviceConsumed:
			return deviceError(DeviceInvalidGrant)
		case !now.Before(d.ExpiresAt):
			return deviceError(DeviceExpiredToken)
		}
		update := map[string]any{"last_poll_at": now}
		tooSoon := d.LastPollAt != nil && now.Sub(*d.LastPollAt) < time.Duration(d.Interval)*time.Second
		switch {
		case tooSoon:
			update["interval"] = d.Interval + deviceSlowDown
			answer = DeviceSlowDown
		case d.Status == DevicePending:
			answer = DeviceAuthorizationPending
		case d.Status == DeviceDenied:
			answer = DeviceAccessDenied
		default: // approved: hand out the token once
			update["status"] = DeviceConsumed
			userID = *d.UserID
		}
		res := tx.Model(&DeviceAuthorization{}).Where("device_code_hash = ? AND status = ?", d.DeviceCodeHash, d.Status).Updates(update)
		if res.Error != nil {
			return Internal("device: poll", res.Error)
		}
		if res.RowsAffected != 1 {
			return deviceError(DeviceInvalidGrant) // a concurrent poll consumed it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if answer != "" {
		return nil, deviceError(answer)
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", userID).Error; err != nil || u.Disabled {
		return nil, deviceError(DeviceAccessDenied)
	}
	tok, _, err := a.Auth().IssueUserToken(u.ID, LoginTTL)
	if err != nil {
		return nil, Internal("device: issue token", err)
	}
	return &DeviceToken{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int(LoginTTL.Seconds())}, nil
}

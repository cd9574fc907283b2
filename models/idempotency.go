package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// IdempotencyTTL is how long a stored first response answers repeats of its Idempotency-Key.
const IdempotencyTTL = 24 * time.Hour

// IdempotentReplay is a stored first response to replay.
type IdempotentReplay struct {
	Status int
	Body   []byte
}

// idempotencyInFlight marks a key whose first request is still running.
const idempotencyInFlight = 0

// BeginIdempotent claims an Idempotency-Key for one identity and route. It returns the stored first
// response when the key already answered the same body; the key with another body is KindUnprocessable
// (422) and a first request still running is KindConflict (409). When it returns (nil, nil) the caller
// runs the request and then calls FinishIdempotent.
func (js *JobService) BeginIdempotent(ctx context.Context, id *Identity, route, key string, body []byte) (*IdempotentReplay, error) {
	a := js.a
	if key == "" {
		return nil, nil
	}
	if len(key) > 200 {
		return nil, Invalid("Idempotency-Key is too long (at most 200 characters)")
	}
	full := idempotencyKey(id, route, key)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	now := a.Now()
	db := a.DB.WithContext(ctx)
	if err := db.Where("key = ? AND created_at < ?", full, now.Add(-IdempotencyTTL)).Delete(&IdempotencyRecord{}).Error; err != nil {
		return nil, Internal("idempotency: expire", err)
	}
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&IdempotencyRecord{Key: full, BodyHash: hash, Status: idempotencyInFlight, CreatedAt: now})
	if res.Error != nil {
		return nil, Internal("idempotency: claim", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil, nil
	}
	var rec IdempotencyRecord
	if err := db.First(&rec, "key = ?", full).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, Conflict("a request with this Idempotency-Key just finished; retry it")
		}
		return nil, Internal("idempotency: read", err)
	}
	if rec.BodyHash != hash {
		return nil, &Error{Kind: KindUnprocessable, Message: "this Idempotency-Key was used with another request body; use a new key for a new request"}
	}
	if rec.Status == idempotencyInFlight {
		return nil, Conflict("a request with this Idempotency-Key is still running; retry shortly")
	}
	return &IdempotentReplay{Status: rec.Status, Body: rec.Response}, nil
}

// FinishIdempotent stores the first response of a claimed key; a response that is not a success
// releases the key instead, so that a corrected retry with the same key runs again.
func (js *JobService) FinishIdempotent(ctx context.Context, id *Identity, route, key string, status int, body []byte) {
	a := js.a
	if key == "" {
		return
	}
	full := idempotencyKey(id, route, key)
	db := a.DB.WithContext(context.WithoutCancel(ctx))
	if status < 200 || status > 299 {
		db.Where("key = ? AND status = ?", full, idempotencyInFlight).Delete(&IdempotencyRecord{})
		return
	}
	db.Model(&IdempotencyRecord{}).Where("key = ?", full).Updates(map[string]any{"status": status, "response": body})
}

func idempotencyKey(id *Identity, route, key string) string {
	return id.Owner() + "|" + route + "|" + key
}

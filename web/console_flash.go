package web

import (
	"encoding/json"
	"net/http"
)

// A change that yields a secret to show once (a new API key, invitation codes) still answers with a
// redirect (post/redirect/get), so that reloading the next page never repeats the change: the secret
// travels to the next page in a flash cookie sealed with the service secret (models.Sealer), read once
// and cleared at once.

// flashCookie names the cookie of the secret shown once on the next page.
const flashCookie = "studio_flash"

// flashTTL bounds how long a flash waits for the next page, in seconds.
const flashTTL = 120

// flash is a secret to show once.
type flash struct {
	For   string   `json:"f,omitempty"` // whose key: an e-mail or a tenant name
	Key   string   `json:"k,omitempty"`
	Codes []string `json:"c,omitempty"` // invitation codes
}

// setFlash stores a flash for the next page.
func (c *Console) setFlash(w http.ResponseWriter, f flash) {
	raw, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: c.svc.Auth().SealCookie(string(raw)), Path: "/", HttpOnly: true,
		Secure: c.secure(), SameSite: http.SameSiteStrictMode, MaxAge: flashTTL})
}

// takeFlash returns the flash waiting for this page, if any, and clears it.
func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", HttpOnly: true, Secure: c.secure(),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	raw, err := c.svc.Auth().OpenCookie(ck.Value)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal([]byte(raw), &f) != nil {
		return nil
	}
	return &f
}

// newKeyOf returns the key of a flash, or nil.
func newKeyOf(f *flash) *newKey {
	if f == nil || f.Key == "" {
		return nil
	}
	return &newKey{For: f.For, Key: f.Key}
}

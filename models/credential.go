package models

import (
	"net/http"
	"strings"
)

// CredentialFromHeader returns the credential a caller sent (spec section 5): the value of X-API-Key, or
// else the token of "Authorization: Bearer <token>" (read only when X-API-Key is absent). The
// auth-scheme is case-insensitive (RFC 7235 section 2.1: "Bearer", "bearer", "BEARER"); another scheme
// ("Basic ...") or an empty token gives "", which ResolveIdentity answers as missing credentials. Every
// surface reads credentials with it: REST and GraphQL from the request headers, GraphQL also from a
// WebSocket connection_init payload (its members put in a Header). The console has no credential header:
// it uses its session cookie.
func CredentialFromHeader(h http.Header) string {
	if key := h.Get("X-API-Key"); key != "" {
		return key
	}
	const scheme = "Bearer"
	auth := h.Get("Authorization")
	if len(auth) > len(scheme)+1 && auth[len(scheme)] == ' ' && strings.EqualFold(auth[:len(scheme)], scheme) {
		return auth[len(scheme)+1:]
	}
	return ""
}

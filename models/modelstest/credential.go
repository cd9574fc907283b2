package modelstest

// CredentialForm is one way of sending a credential (spec section 5): request headers, or the members of
// a GraphQL WebSocket connection_init payload, and whether every surface accepts it.
type CredentialForm struct {
	Name     string
	Headers  map[string]string
	Accepted bool
}

// CredentialForms returns the forms of sending key that every surface reads alike
// (models.CredentialFromHeader): X-API-Key and the Bearer scheme in any case are accepted; another
// scheme and an empty bearer token are refused as missing credentials.
func CredentialForms(key string) []CredentialForm {
	return []CredentialForm{
		{Name: "X-API-Key", Headers: map[string]string{"X-API-Key": key}, Accepted: true},
		{Name: "Bearer", Headers: map[string]string{"Authorization": "Bearer " + key}, Accepted: true},
		{Name: "bearer", Headers: map[string]string{"Authorization": "bearer " + key}, Accepted: true},
		{Name: "BEARER", Headers: map[string]string{"Authorization": "BEARER " + key}, Accepted: true},
		{Name: "Basic", Headers: map[string]string{"Authorization": "Basic " + key}},
		{Name: "empty bearer", Headers: map[string]string{"Authorization": "Bearer "}},
	}
}

package models

// registerClaimAdmin adds the administrator actions on claim codes (promo-claim-disable).
func registerClaimAdmin(r *AdminActions, a *App) {}

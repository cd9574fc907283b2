package models

import (
	"context"
	"time"
)

// MaxClaimCodesListed bounds a listing of claim codes (newest first).
const MaxClaimCodesListed = 500

// ClaimCodeView is a claim code as its tenant or the platform administrator sees it in the console.
type ClaimCodeView struct {
	Code        string             `json:"code"`
	TenantID    string             `json:"tenant_id"`
	TenantName  string             `json:"tenant_name"`
	Credits     int64              `json:"credits"`
	Note        string             `json:"note"`
	Status      ClaimStatus        `json:"status"` // active | used | disabled
	ClaimURL    string             `json:"claim_url"`
	ReplyText   string             `json:"reply_text"`
	ProductCopy string             `json:"product_copy"`
	Templates   []ClaimTemplateRef `json:"templates"`
	TutorialPDF *TutorialPDF       `json:"tutorial_pdf"`
	// RedeemedEmail is shown to the administrator only; a tenant sees that and when a code was used.
	RedeemedEmail string     `json:"redeemed_email,omitempty"`
	RedeemedAt    *time.Time `json:"redeemed_at"`
	CreatedAt     time.Time  `json:"created_at"`
}

// ClaimCodesFor lists claim codes, newest first (at most MaxClaimCodesListed): a tenant key its own
// codes, the administrator every code. Any other identity is KindForbidden (tenants see their codes only
// through the console, spec 4.14).
func (cls *ClaimService) ClaimCodesFor(ctx context.Context, id *Identity) ([]ClaimCodeView, error) {
	a := cls.a
	if err := id.Require(CapReadClaimCodes); err != nil {
		return nil, err
	}
	db := a.DB.WithContext(ctx)
	q := db.Model(&ClaimCode{})
	switch id.Kind {
	case IdentityTenant:
		q = q.Where("tenant_id = ?", id.TenantID)
	case IdentityAdmin:
	default:
		return nil, Forbidden("claim codes are listed to their tenant and to the platform administrator")
	}
	var rows []ClaimCode
	if err := q.Order("created_at DESC, code").Limit(MaxClaimCodesListed).Find(&rows).Error; err != nil {
		return nil, Internal("claim: list codes", err)
	}
	// Load every bundled template once for the whole page.
	var ids []string
	seenID := map[string]bool{}
	for i := range rows {
		for _, tid := range rows[i].templateIDs() {
			if !seenID[tid] {
				seenID[tid] = true
				ids = append(ids, tid)
			}
		}
	}
	all, err := loadClaimTemplates(db, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]claimTemplate, len(all))
	for _, t := range all {
		byID[t.id] = t
	}
	names := map[string]string{}
	out := make([]ClaimCodeView, 0, len(rows))
	for i := range rows {
		c := &rows[i]
		name, seen := names[c.TenantID]
		if !seen {
			if name, err = claimProviderName(db, c.TenantID); err != nil {
				return nil, err
			}
			names[c.TenantID] = name
		}
		var tpls []claimTemplate
		for _, tid := range c.templateIDs() {
			tpls = append(tpls, byID[tid])
		}
		v := ClaimCodeView{Code: c.Code, TenantID: c.TenantID, TenantName: name, Credits: c.Credits, Note: c.Note,
			Status: c.status(), ClaimURL: a.Claims().ClaimURL(c.Code), ProductCopy: c.ProductCopy, Templates: claimRefs(presentTemplates(tpls)),
			TutorialPDF: c.tutorial(), RedeemedAt: c.RedeemedAt, CreatedAt: c.CreatedAt.UTC()}
		v.ReplyText = claimReplyText(&ClaimCreated{Code: c.Code, ClaimURL: v.ClaimURL, Credits: c.Credits,
			Templates: v.Templates, TutorialPDF: v.TutorialPDF})
		if id.Kind == IdentityAdmin {
			v.RedeemedEmail = c.RedeemedEmail
		}
		out = append(out, v)
	}
	return out, nil
}

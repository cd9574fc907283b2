package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Claim codes (spec 2.7, 4.14; decisions D3, D8). A tenant bundles platform templates and credits into a
// single-use code that it sells; a buyer who opens the claim link redeems it with a nickname and an
// e-mail and gets a personal account holding the credits and access to the bundled templates.
//
//   - Creation is one transaction: the credits leave the tenant pool's spendable part (ledger kind
//     claim; an unmetered tenant is recorded with nothing deducted), every bundled template becomes
//     gated, and the code is stored with the tenant recorded on it. Any failure leaves pool and
//     templates as they were. The tenant's monthly quota is not touched: a code is not usage.
//   - Redemption is one transaction that marks the code used with a conditional update, so that it
//     succeeds exactly once however many buyers race for one code; only that transaction creates (or
//     reuses) the personal account of the e-mail, grants the credits (ledger kind grant) and the
//     templates (TemplateGrant). Redeeming again with the same e-mail answers the same result again
//     without granting anything; another e-mail gets 409 (KindConflict).
//   - A platform administrator voids a code (admin action promo-claim-disable); a void code cannot be
//     redeemed (409). Voiding does not take back what a redemption already granted. Tenants have no void.

// ClaimCodePrefix starts every claim code.
const ClaimCodePrefix = "promo-"

// ClaimLoginTTL is the validity of the login token a redemption that created the account returns:
// short-lived on purpose (D8), the buyer sets a password with it and signs in with that afterwards.
const ClaimLoginTTL = 24 * time.Hour

// Limits per client address and hour of the public claim operations, against guessing codes. They are
// counted in the database, so they hold for every surface (REST, the claim pages) and every replica.
const (
	ClaimPreviewsPerAddress = 300
	ClaimRedeemsPerAddress  = 20
)

// DefaultTutorialTitle is the title of a tutorial PDF given without one.
const DefaultTutorialTitle = "使用教程"

// ClaimStatus is the status of a claim code, as the public preview reports it.
type ClaimStatus string

// Claim code statuses.
const (
	ClaimActive   ClaimStatus = "active"
	ClaimUsed     ClaimStatus = "used"
	ClaimDisabled ClaimStatus = "disabled"
)

const (
	// claimSuffixLen characters of claimAlphabet (32 symbols, 5 bits each) give 100 random bits.
	claimSuffixLen = 20
	// claimAlphabet is lower-case letters and digits without the look-alikes l, o, 0 and 1.
	claimAlphabet       = "abcdefghijkmnpqrstuvwxyz23456789"
	maxClaimTemplates   = 20
	maxClaimCredits     = 1_000_000_000
	maxClaimNoteLen     = 500
	maxTutorialTitleLen = 200
	maxProductCopyLen   = 4000
	maxLedgerNoteLen    = 500
	maxNicknameLen      = 50
)

// ClaimInput is the body of POST /api/tenant-claims.
type ClaimInput struct {
	// TemplateIDs names 1 to 20 active platform templates (image, copy or video); duplicates count once.
	TemplateIDs []string `json:"template_ids"`
	// Credits is a positive integer taken from the tenant pool's spendable part.
	Credits          *int64 `json:"credits"`
	Note             string `json:"note"`
	TutorialPDFURL   string `json:"tutorial_pdf_url"`
	TutorialPDFTitle string `json:"tutorial_pdf_title"`
}

// ClaimTemplateRef names a bundled template in create and redeem answers. Slug is null for an image or
// copy template without one.
type ClaimTemplateRef struct {
	Slug   *string `json:"slug"`
	ZhName string  `json:"zh_name"`
}

// TutorialPDF is the downloadable tutorial of a claim code.
type TutorialPDF struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// ClaimCreated is the answer of POST /api/tenant-claims (spec 2.7).
type ClaimCreated struct {
	Code                string             `json:"code"`
	ClaimURL            string             `json:"claim_url"`
	ReplyText           string             `json:"reply_text"`
	ProductCopy         string             `json:"product_copy"`
	ProductImages       []string           `json:"product_images"`
	Credits             int64              `json:"credits"`
	Templates           []ClaimTemplateRef `json:"templates"`
	TutorialPDF         *TutorialPDF       `json:"tutorial_pdf"`
	CreditsBalanceAfter int64              `json:"credits_balance_after"`
}

// ClaimTemplateInfo is a bundled template as the public preview shows it: never any prompt text.
type ClaimTemplateInfo struct {
	Type         string   `json:"type"` // image | article | video
	Slug         *string  `json:"slug"`
	ZhName       string   `json:"zh_name"`
	Description  string   `json:"description"`
	SampleImages []string `json:"sample_images"`
}

// ClaimPreview is the answer of GET /api/promo-claims?code=: the benefit list of a code. A used or
// disabled code is still previewed, with Claimable false and its Status.
type ClaimPreview struct {
	Code        string              `json:"code"`
	Credits     int64               `json:"credits"`
	Templates   []ClaimTemplateInfo `json:"templates"`
	TutorialPDF *TutorialPDF        `json:"tutorial_pdf"`
	Claimable   bool                `json:"claimable"`
	Status      ClaimStatus         `json:"status"`
	ProvidedBy  string              `json:"provided_by"`
}

// RedeemInput is the body of POST /api/promo-claims.
type RedeemInput struct {
	Code     string `json:"code"`
	Nickname string `json:"nickname"`
	Email    string `json:"email"`
}

// ClaimRedeemed is the answer of POST /api/promo-claims: what the buyer got and how to sign in (D8).
// When the redemption created the account of the e-mail, Token is a login token for it, valid
// ClaimLoginTTL, with which the buyer sets the first password; it comes in that first answer only.
// When the account existed before (or the code was redeemed before), Token is null and SignInRequired
// true: what the code gives is granted to the account, whose owner signs in as usual.
type ClaimRedeemed struct {
	Credits        int64              `json:"credits"`
	Templates      []ClaimTemplateRef `json:"templates"`
	TutorialPDF    *TutorialPDF       `json:"tutorial_pdf"`
	Token          *string            `json:"token"`
	TokenExpiresAt *time.Time         `json:"token_expires_at"`
	SignInRequired bool               `json:"sign_in_required"`
	LoginHint      string             `json:"login_hint"`
}

// RedeemedCode is one code a buyer redeemed, in GET /api/claims.
type RedeemedCode struct {
	Code       string             `json:"code"`
	Credits    int64              `json:"credits"`
	ProvidedBy string             `json:"provided_by"`
	RedeemedAt time.Time          `json:"redeemed_at"`
	Templates  []ClaimTemplateRef `json:"templates"`
}

// UserClaims is the answer of GET /api/claims: the templates a personal login holds through claims, as
// it sees them (full prompts), and the codes it redeemed, newest first.
type UserClaims struct {
	Templates      []TemplateView      `json:"templates"`
	VideoTemplates []VideoTemplateView `json:"video_templates"`
	Codes          []RedeemedCode      `json:"codes"`
}

// claimTemplate is a bundled template of either collection, as the claim rules read it.
type claimTemplate struct {
	id          string
	typ         string // image | article | video
	slug        *string
	zhName      string
	description string
	images      []string // sample images; a video template's cover
	usable      bool     // an active platform template: what a code may bundle
}

func (c claimTemplate) ref() ClaimTemplateRef {
	return ClaimTemplateRef{Slug: c.slug, ZhName: c.zhName}
}

// errClaimNotFound is the one answer for an unknown code.
var errClaimNotFound = NotFound("claim code")

// NewClaimCode returns a fresh code: the prefix and 20 characters (100 bits) from crypto/rand.
func NewClaimCode() string { return ClaimCodePrefix + RandomString(claimSuffixLen, claimAlphabet) }

// ClaimURL returns the landing page of a code on {claim_site_url}.
func (cls *ClaimService) ClaimURL(code string) string {
	a := cls.a
	return strings.TrimRight(a.Config.ClaimSiteURL, "/") + "/claim/" + code
}

// validate checks and normalises the input; it returns the distinct template ids in their order.
func (in *ClaimInput) validate() ([]string, error) {
	if len(in.TemplateIDs) == 0 {
		return nil, Invalid("template_ids is required: a non-empty array of platform template ids")
	}
	seen := map[string]bool{}
	var ids []string
	for i, id := range in.TemplateIDs {
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, Invalid("template_ids[%d]: a template id is required", i)
		}
		if _, err := uuid.Parse(id); err != nil {
			return nil, notClaimable(i, id)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) > maxClaimTemplates {
		return nil, Invalid("template_ids: at most %d templates per claim code", maxClaimTemplates)
	}
	switch {
	case in.Credits == nil:
		return nil, Invalid("credits is required: a positive integer")
	case *in.Credits <= 0:
		return nil, Invalid("credits must be a positive integer, not %d", *in.Credits)
	case *in.Credits > maxClaimCredits:
		return nil, Invalid("credits: at most %d per claim code", maxClaimCredits)
	}
	in.Note = strings.TrimSpace(in.Note)
	if utf8.RuneCountInString(in.Note) > maxClaimNoteLen || hasControlChars(in.Note, true) {
		return nil, Invalid("note: at most %d characters, no control characters", maxClaimNoteLen)
	}
	in.TutorialPDFURL = strings.TrimSpace(in.TutorialPDFURL)
	in.TutorialPDFTitle = strings.TrimSpace(in.TutorialPDFTitle)
	if in.TutorialPDFURL == "" {
		if in.TutorialPDFTitle != "" {
			return nil, Invalid("tutorial_pdf_title needs tutorial_pdf_url")
		}
		return ids, nil
	}
	if err := checkURL("tutorial_pdf_url", in.TutorialPDFURL); err != nil {
		return nil, err
	}
	if in.TutorialPDFTitle == "" {
		in.TutorialPDFTitle = DefaultTutorialTitle
	}
	if utf8.RuneCountInString(in.TutorialPDFTitle) > maxTutorialTitleLen || hasControlChars(in.TutorialPDFTitle, false) {
		return nil, Invalid("tutorial_pdf_title: at most %d characters, no control characters", maxTutorialTitleLen)
	}
	return ids, nil
}

// CreateClaimCode creates a claim code of the tenant (spec 4.14) in one transaction: the credits leave
// the pool's spendable part (KindConflict with need and have when it is short), every bundled template
// becomes gated, and the code is stored with the tenant recorded on it. A failure at any step, the
// store included, leaves pool and templates exactly as they were.
func (cls *ClaimService) CreateClaimCode(ctx context.Context, id *Identity, in ClaimInput) (*ClaimCreated, error) {
	a := cls.a
	if err := id.Require(CapClaimCodes); err != nil {
		return nil, err
	}
	tenantID := id.TenantID
	ids, err := in.validate()
	if err != nil {
		return nil, err
	}
	credits := *in.Credits
	code := NewClaimCode()
	var out *ClaimCreated
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		t, err := findTenant(tx, tenantID)
		if err != nil {
			return err
		}
		tpls, err := loadClaimTemplates(tx, ids)
		if err != nil {
			return err
		}
		for i, c := range tpls {
			if !c.usable {
				return notClaimable(i, ids[i])
			}
		}
		if err := a.takeClaimCredits(tx, t, credits, code, in.Note); err != nil {
			return err
		}
		if err := a.Templates().GateTemplatesTx(tx, ids); err != nil {
			return err
		}
		copyText, images := claimProductCopy(t.Name, credits, tpls), claimProductImages(tpls)
		row := &ClaimCode{Code: code, TenantID: t.ID, Credits: credits, Note: in.Note, TemplateIDs: mustJSON(ids),
			ProductCopy: copyText, ProductImages: mustJSON(images), TutorialPDFURL: in.TutorialPDFURL,
			TutorialPDFTitle: in.TutorialPDFTitle, CreatedAt: a.Now()}
		if err := tx.Create(row).Error; err != nil {
			return Internal("claim: store code", err)
		}
		out = &ClaimCreated{Code: code, ClaimURL: a.Claims().ClaimURL(code), ProductCopy: copyText,
			ProductImages: images, Credits: credits, Templates: claimRefs(tpls), TutorialPDF: row.tutorial(),
			CreditsBalanceAfter: t.Balance()}
		out.ReplyText = claimReplyText(out)
		return nil
	})
	if err != nil {
		return nil, asCoreError("claim: create", err)
	}
	return out, nil
}

// notClaimable refuses a template id that names no active platform template; it says no more, so that
// the ids of other tenants' templates are not disclosed.
func notClaimable(i int, id string) error {
	return Invalid("template_ids[%d]: %q is not an active platform template (a claim code bundles only shared platform templates)", i, id)
}

// takeClaimCredits moves the code's credits out of the tenant's spendable part with a ledger row of
// kind claim; t is refreshed. An unmetered tenant is recorded with nothing deducted.
func (a *App) takeClaimCredits(tx *gorm.DB, t *Tenant, credits int64, code, note string) error {
	ledgerNote := "claim code"
	if note != "" {
		ledgerNote = clipClaimText(ledgerNote+": "+note, maxLedgerNoteLen)
	}
	if t.Unmetered {
		return a.newLedger(tx).write(LedgerClaim, BalanceTenantSpendable, t.ID, "", "", 0, t.Spendable, code,
			clipClaimText(fmt.Sprintf("unmetered: claim code of %d credits, nothing deducted", credits), maxLedgerNoteLen))
	}
	return a.creditTenant(tx, t, -credits, LedgerClaim, code, ledgerNote)
}

// loadClaimTemplates loads the templates of either collection that ids name, in the order of ids; an
// id that names none yields an entry that is not usable.
func loadClaimTemplates(tx *gorm.DB, ids []string) ([]claimTemplate, error) {
	byID := make(map[string]claimTemplate, len(ids))
	if len(ids) > 0 {
		var rows []Template
		if err := tx.Where("id IN ?", ids).Find(&rows).Error; err != nil {
			return nil, Internal("claim: load templates", err)
		}
		for i := range rows {
			t := &rows[i]
			images := []string{}
			if t.Type == TemplateImage {
				images = decodeStrings(t.SampleImages)
			}
			byID[t.ID] = claimTemplate{id: t.ID, typ: t.Type, slug: t.Slug, zhName: t.ZhName, description: t.Description,
				images: images, usable: t.IsPlatform() && t.Active}
		}
		var videos []VideoTemplate
		if err := tx.Where("id IN ?", ids).Find(&videos).Error; err != nil {
			return nil, Internal("claim: load video templates", err)
		}
		for i := range videos {
			t := &videos[i]
			images := []string{}
			if t.SampleCoverImage != "" {
				images = []string{t.SampleCoverImage}
			}
			slug := t.Slug
			byID[t.ID] = claimTemplate{id: t.ID, typ: "video", slug: &slug, zhName: t.ZhName, description: t.Description,
				images: images, usable: t.IsPlatform() && t.Active}
		}
	}
	out := make([]claimTemplate, len(ids))
	for i, id := range ids {
		c, ok := byID[id]
		if !ok {
			c = claimTemplate{id: id}
		}
		out[i] = c
	}
	return out, nil
}

// presentTemplates drops the entries of templates that no longer exist (deleted since the code was made).
func presentTemplates(tpls []claimTemplate) []claimTemplate {
	out := make([]claimTemplate, 0, len(tpls))
	for _, c := range tpls {
		if c.typ != "" {
			out = append(out, c)
		}
	}
	return out
}

// claimRefs returns the slug and name of each template.
func claimRefs(tpls []claimTemplate) []ClaimTemplateRef {
	out := make([]ClaimTemplateRef, len(tpls))
	for i, c := range tpls {
		out[i] = c.ref()
	}
	return out
}

// claimProductImages returns the first sample image (a video template's cover) of each template that has one.
func claimProductImages(tpls []claimTemplate) []string {
	out := []string{}
	for _, c := range tpls {
		if len(c.images) > 0 {
			out = append(out, c.images[0])
		}
	}
	return out
}

// claimProductCopy is the product listing text of a code, opened by the provided-by line naming the tenant.
func claimProductCopy(tenantName string, credits int64, tpls []claimTemplate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "由「%s」提供\n", tenantName)
	b.WriteString("【包含内容】\n")
	for _, c := range tpls {
		fmt.Fprintf(&b, "· 模板「%s」", c.zhName)
		if d := strings.TrimSpace(c.description); d != "" {
			fmt.Fprintf(&b, "：%s", clipClaimText(d, 60))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "· %d 积分（可用于生成图片、视频和文案）\n", credits)
	b.WriteString("【使用方式】下单后获得专属领取链接，打开链接填写昵称和邮箱即可开通账号，领取后即可使用模板。")
	return clipClaimText(b.String(), maxProductCopyLen)
}

// claimReplyText is the message a tenant pastes to its buyer: the link, the credits and the template names.
func claimReplyText(c *ClaimCreated) string {
	names := make([]string, len(c.Templates))
	for i, t := range c.Templates {
		names[i] = "「" + t.ZhName + "」"
	}
	var b strings.Builder
	b.WriteString("您好，感谢购买！您的专属领取链接：\n")
	b.WriteString(c.ClaimURL + "\n")
	fmt.Fprintf(&b, "打开链接，填写昵称和邮箱即可领取：%d 积分，以及模板%s。\n", c.Credits, strings.Join(names, ""))
	if c.TutorialPDF != nil {
		fmt.Fprintf(&b, "领取完成后可下载《%s》。\n", c.TutorialPDF.Title)
	}
	fmt.Fprintf(&b, "领取码：%s（仅可领取一次，请勿转发给他人）", c.Code)
	return b.String()
}

// tutorial returns the code's tutorial PDF, nil when none was given.
func (c *ClaimCode) tutorial() *TutorialPDF {
	if c.TutorialPDFURL == "" {
		return nil
	}
	return &TutorialPDF{URL: c.TutorialPDFURL, Title: c.TutorialPDFTitle}
}

// status reports whether the code is active, used or disabled (disabled wins over used).
func (c *ClaimCode) status() ClaimStatus {
	switch {
	case c.Disabled:
		return ClaimDisabled
	case c.RedeemedAt != nil:
		return ClaimUsed
	}
	return ClaimActive
}

// templateIDs returns the ids stored on the code.
func (c *ClaimCode) templateIDs() []string { return decodeStrings(c.TemplateIDs) }

// findClaimCode loads a code; an unknown or malformed one is errClaimNotFound.
func findClaimCode(db *gorm.DB, code string) (*ClaimCode, error) {
	code = strings.TrimSpace(code)
	if !validClaimCode(code) {
		return nil, errClaimNotFound
	}
	var c ClaimCode
	err := db.First(&c, "code = ?", code).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errClaimNotFound
	}
	if err != nil {
		return nil, Internal("claim: load code", err)
	}
	return &c, nil
}

// PreviewClaim returns the public benefit list of a code (GET /api/promo-claims): templates without any
// prompt text, credits, tutorial, the tenant that provides it, and whether it can still be claimed.
// An unknown code is KindNotFound; a used or disabled one is answered with Claimable false.
func (cls *ClaimService) PreviewClaim(ctx context.Context, code, clientAddr string) (*ClaimPreview, error) {
	a := cls.a
	if err := a.countClaimCall(ctx, "claim-preview/address", clientAddr, ClaimPreviewsPerAddress); err != nil {
		return nil, err
	}
	if strings.TrimSpace(code) == "" {
		return nil, Invalid("code is required")
	}
	db := a.DB.WithContext(ctx)
	c, err := findClaimCode(db, code)
	if err != nil {
		return nil, err
	}
	tpls, err := loadClaimTemplates(db, c.templateIDs())
	if err != nil {
		return nil, err
	}
	providedBy, err := claimProviderName(db, c.TenantID)
	if err != nil {
		return nil, err
	}
	p := &ClaimPreview{Code: c.Code, Credits: c.Credits, Templates: []ClaimTemplateInfo{}, TutorialPDF: c.tutorial(),
		Status: c.status(), ProvidedBy: providedBy}
	p.Claimable = p.Status == ClaimActive
	for _, t := range presentTemplates(tpls) {
		p.Templates = append(p.Templates, ClaimTemplateInfo{Type: t.typ, Slug: t.slug, ZhName: t.zhName,
			Description: t.description, SampleImages: t.images})
	}
	return p, nil
}

// claimProviderName returns the name of a tenant, "" when it no longer exists.
func claimProviderName(db *gorm.DB, tenantID string) (string, error) {
	var names []string
	if err := db.Model(&Tenant{}).Where("id = ?", tenantID).Limit(1).Pluck("name", &names).Error; err != nil {
		return "", Internal("claim: tenant name", err)
	}
	if len(names) == 0 {
		return "", nil
	}
	return names[0], nil
}

// validate checks and normalises a redemption; the e-mail is lower-cased.
func (in *RedeemInput) validate() error {
	in.Code = strings.TrimSpace(in.Code)
	if in.Code == "" {
		return Invalid("code is required")
	}
	in.Nickname = strings.TrimSpace(in.Nickname)
	if n := utf8.RuneCountInString(in.Nickname); n == 0 || n > maxNicknameLen || hasControlChars(in.Nickname, false) {
		return Invalid("nickname is required: 1 to %d characters, no control characters", maxNicknameLen)
	}
	email, err := checkEmail(in.Email)
	in.Email = email
	return err
}

// RedeemClaim redeems a code for the personal account of the e-mail (created when absent): in one
// transaction the code is marked used by a conditional update (exactly once, however many redemptions
// race), the credits are granted through the ledger (kind grant) and the bundled templates through
// TemplateGrant rows. Redeeming again with the same e-mail answers the same grant and grants nothing;
// another e-mail, or a disabled code, is KindConflict; an unknown code KindNotFound. Calls are limited
// per client address (ClaimRedeemsPerAddress an hour), counted also when refused.
//
// A redemption never signs anyone in to an account that existed before it (D8): only the answer of the
// redemption that created the account carries a login token; every other answer carries none and says
// SignInRequired. Knowing a code and an e-mail therefore never opens an account its owner already holds.
func (cls *ClaimService) RedeemClaim(ctx context.Context, in RedeemInput, clientAddr string) (*ClaimRedeemed, error) {
	a := cls.a
	if err := a.countClaimCall(ctx, "claim-redeem/address", clientAddr, ClaimRedeemsPerAddress); err != nil {
		return nil, err
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	var (
		c       *ClaimCode
		user    *User
		created bool
		tpls    []claimTemplate
	)
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		created, tpls = false, nil // the transaction may be run again
		if c, err = findClaimCode(tx, in.Code); err != nil {
			return err
		}
		if err := redeemable(c, in.Email); err != nil {
			return err
		}
		if c.RedeemedAt != nil { // the same e-mail again: answered below, nothing granted
			user, err = claimUserTx(tx, deref(c.RedeemedBy))
			return err
		}
		if user, created, err = a.userForClaimTx(tx, in.Email, in.Nickname); err != nil {
			return err
		}
		now := a.Now().UTC()
		res := tx.Model(&ClaimCode{}).
			Where("code = ? AND redeemed_at IS NULL AND disabled = ?", c.Code, false).
			Updates(map[string]any{"redeemed_by": user.ID, "redeemed_email": in.Email, "redeemed_at": now})
		if res.Error != nil {
			return Internal("claim: mark redeemed", res.Error)
		}
		if res.RowsAffected != 1 {
			// A concurrent redemption or void won: judge again on what it committed.
			if c, err = findClaimCode(tx, c.Code); err != nil {
				return err
			}
			if err := redeemable(c, in.Email); err != nil {
				return err
			}
			if c.RedeemedAt == nil {
				return Conflict("the claim code changed concurrently; retry")
			}
			return errRedeemedMeanwhile
		}
		if tpls, err = loadClaimTemplates(tx, c.templateIDs()); err != nil {
			return err
		}
		return a.grantClaimTx(tx, c, user, in, presentTemplates(tpls), now)
	})
	if errors.Is(err, errRedeemedMeanwhile) {
		// The same e-mail won concurrently: this transaction rolled back, the answer is the repeat's.
		err, created = nil, false
	}
	if err != nil {
		return nil, asCoreError("claim: redeem", err)
	}
	if tpls == nil {
		if tpls, err = loadClaimTemplates(a.DB.WithContext(ctx), c.templateIDs()); err != nil {
			return nil, err
		}
	}
	out := &ClaimRedeemed{Credits: c.Credits, Templates: claimRefs(presentTemplates(tpls)), TutorialPDF: c.tutorial(),
		SignInRequired: true, LoginHint: claimSignInHint(in.Email)}
	if created {
		tok, exp, err := a.issueUserToken(user, ClaimLoginTTL) // the row this redemption created
		if err != nil {
			return nil, Internal("claim: issue token", err)
		}
		exp = exp.UTC()
		out.Token, out.TokenExpiresAt, out.SignInRequired, out.LoginHint = &tok, &exp, false, claimLoginHint(in.Email)
	}
	return out, nil
}

// countClaimCall counts one public claim call of the client address, in a transaction of its own so
// that refused calls count too.
func (a *App) countClaimCall(ctx context.Context, kind, clientAddr string, limit int) error {
	if clientAddr == "" {
		return nil
	}
	err := a.Tx(ctx, func(tx *gorm.DB) error { return a.limitSubject(tx, kind, "addr:"+clientAddr, limit) })
	var e *Error
	if KindOf(err) == KindRateLimited && errors.As(err, &e) {
		e.Message = fmt.Sprintf("rate limit exceeded: at most %d claim calls per hour from one address; retry in %d s",
			limit, int(e.RetryAfter.Seconds())+1)
	}
	return err
}

// claimUserTx reads the account a code was redeemed for; a disabled one is refused.
func claimUserTx(tx *gorm.DB, userID string) (*User, error) {
	var u User
	if err := tx.Select("id, disabled").First(&u, "id = ?", userID).Error; err != nil {
		return nil, Internal("claim: read user", err)
	}
	if u.Disabled {
		return nil, errUserDisabled
	}
	return &u, nil
}

// errUserDisabled refuses a redemption for the disabled personal account of the e-mail.
var errUserDisabled = Forbidden("the personal account of this e-mail is disabled")

// errRedeemedMeanwhile rolls back a redemption that a concurrent one of the same e-mail has beaten.
var errRedeemedMeanwhile = errors.New("claim: redeemed meanwhile by the same e-mail")

// redeemable returns nil when email may redeem c now or has redeemed it before, else the refusal.
func redeemable(c *ClaimCode, email string) error {
	switch {
	case c.Disabled:
		return Conflict("this claim code has been disabled and can no longer be redeemed")
	case c.RedeemedAt != nil && c.RedeemedEmail != email:
		return Conflict("this claim code has already been redeemed by another e-mail address")
	}
	return nil
}

// userForClaimTx returns the personal account of the e-mail, creating it with the nickname when absent,
// and whether it created it. A concurrent creation of the same e-mail is absorbed (insert or nothing,
// then read): only the transaction whose insert took the row created the account.
func (a *App) userForClaimTx(tx *gorm.DB, email, nickname string) (*User, bool, error) {
	now := a.Now()
	fresh := &User{ID: NewID(), Email: email, Nickname: nickname, CreatedAt: now, UpdatedAt: now}
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, DoNothing: true}).Create(fresh)
	if res.Error != nil {
		return nil, false, Internal("claim: create user", res.Error)
	}
	var u User
	if err := tx.First(&u, "email = ?", email).Error; err != nil {
		return nil, false, Internal("claim: read user", err)
	}
	if u.Disabled {
		return nil, false, errUserDisabled
	}
	return &u, res.RowsAffected == 1 && u.ID == fresh.ID, nil
}

// grantClaimTx records the redemption and grants the code's credits and templates to the user.
func (a *App) grantClaimTx(tx *gorm.DB, c *ClaimCode, u *User, in RedeemInput, tpls []claimTemplate, now time.Time) error {
	red := &ClaimRedemption{ID: NewID(), Code: c.Code, UserID: u.ID, Email: in.Email, Nickname: in.Nickname, CreatedAt: now}
	if err := tx.Create(red).Error; err != nil {
		return Internal("claim: record redemption", err)
	}
	if _, err := a.creditUserTx(tx, u.ID, c.Credits, LedgerGrant, c.Code, "claim code"); err != nil {
		return err
	}
	if len(tpls) == 0 {
		return nil
	}
	grants := make([]TemplateGrant, len(tpls))
	for i, t := range tpls {
		grants[i] = TemplateGrant{UserID: u.ID, TemplateID: t.id, Code: c.Code, CreatedAt: now}
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&grants).Error; err != nil {
		return Internal("claim: grant templates", err)
	}
	return nil
}

// claimSignInHint tells the owner of an account that existed before the redemption how to sign in.
func claimSignInHint(email string) string {
	return fmt.Sprintf("积分和模板已加入 %s 的账号。请用该邮箱和密码登录（控制台 /login，或 studio login）；"+
		"还没有密码或忘记密码时，在 /login/code 用发到该邮箱的验证码设置密码。之后 GET /api/claims 查看已领取的模板。", email)
}

// claimLoginHint tells the buyer of a new account how to use the token and how to sign in later.
func claimLoginHint(email string) string {
	return fmt.Sprintf("token 是 %s 的登录凭证，%d 小时内有效：请求时带上 Authorization: Bearer <token>，"+
		"GET /api/claims 查看已领取的模板。有效期内在领取页设置密码（或 POST /api/auth/password，old_password 留空），"+
		"设置后此 token 失效，以该邮箱和密码登录（控制台 /login，或 studio login）。", email, int(ClaimLoginTTL.Hours()))
}

// UserClaims returns what a personal login holds through claims (GET /api/claims): the granted
// templates as the login sees them (a grant unlocks a gated template's prompt and images) and the codes
// it redeemed, newest first.
func (cls *ClaimService) UserClaims(ctx context.Context, id *Identity) (*UserClaims, error) {
	a := cls.a
	if err := id.Require(CapClaims); err != nil {
		return nil, err
	}
	db := a.DB.WithContext(ctx)
	var grants []TemplateGrant
	if err := db.Where("user_id = ?", id.UserID).Order("created_at, template_id").Find(&grants).Error; err != nil {
		return nil, Internal("claim: load grants", err)
	}
	ids := make([]string, len(grants))
	for i, g := range grants {
		ids[i] = g.TemplateID
	}
	out := &UserClaims{Templates: []TemplateView{}, VideoTemplates: []VideoTemplateView{}, Codes: []RedeemedCode{}}
	v := newViewer(db, id)
	if len(ids) > 0 {
		var rows []Template
		if err := db.Where("id IN ?", ids).Order("created_at DESC, id").Find(&rows).Error; err != nil {
			return nil, Internal("claim: load templates", err)
		}
		for i := range rows {
			view, err := v.templateView(&rows[i])
			if err != nil {
				return nil, asCoreError("claim: template view", err)
			}
			if view != nil {
				out.Templates = append(out.Templates, *view)
			}
		}
		var videos []VideoTemplate
		if err := db.Where("id IN ?", ids).Order("created_at DESC, id").Find(&videos).Error; err != nil {
			return nil, Internal("claim: load video templates", err)
		}
		for i := range videos {
			view, err := v.videoTemplateView(&videos[i])
			if err != nil {
				return nil, asCoreError("claim: video template view", err)
			}
			if view != nil {
				out.VideoTemplates = append(out.VideoTemplates, *view)
			}
		}
	}
	var codes []ClaimCode
	if err := db.Where("redeemed_by = ?", id.UserID).Order("redeemed_at DESC, code").Find(&codes).Error; err != nil {
		return nil, Internal("claim: load codes", err)
	}
	for i := range codes {
		c := &codes[i]
		tpls, err := loadClaimTemplates(db, c.templateIDs())
		if err != nil {
			return nil, err
		}
		name, err := claimProviderName(db, c.TenantID)
		if err != nil {
			return nil, err
		}
		out.Codes = append(out.Codes, RedeemedCode{Code: c.Code, Credits: c.Credits, ProvidedBy: name,
			RedeemedAt: c.RedeemedAt.UTC(), Templates: claimRefs(presentTemplates(tpls))})
	}
	return out, nil
}

// DisableClaimCode voids a code (administrator action promo-claim-disable): it can no longer be redeemed.
// What an earlier redemption granted stays granted. An unknown code is KindNotFound.
func (cls *ClaimService) DisableClaimCode(ctx context.Context, code string) error {
	a := cls.a
	if strings.TrimSpace(code) == "" {
		return Invalid("code is required")
	}
	return a.Tx(ctx, func(tx *gorm.DB) error {
		c, err := findClaimCode(tx, code)
		if err != nil {
			return err
		}
		if err := tx.Model(&ClaimCode{}).Where("code = ?", c.Code).Update("disabled", true).Error; err != nil {
			return Internal("claim: disable", err)
		}
		return nil
	})
}

// registerClaimAdmin adds the administrator actions on claim codes (promo-claim-disable).
func registerClaimAdmin(r *AdminActions, a *App) {
	r.Register(AdminAction{
		Name: "promo-claim-disable", Summary: "void a claim code: it can no longer be redeemed (grants already made stay)",
		Params: []AdminParam{{"code", "string", "claim code (promo-...)", true}},
		Run: adminRun(func(ctx context.Context, in struct {
			Code string `json:"code"`
		}) (any, error) {
			if err := a.Claims().DisableClaimCode(ctx, in.Code); err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		}),
	})
}

// clipClaimText shortens s to at most n characters.
func clipClaimText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// validClaimCode reports whether s has the shape of a claim code: the prefix, then letters and digits.
func validClaimCode(s string) bool {
	if !strings.HasPrefix(s, ClaimCodePrefix) || len(s) == len(ClaimCodePrefix) || len(s) > 64 {
		return false
	}
	for _, r := range s[len(ClaimCodePrefix):] {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// hasControlChars reports whether s holds a control character (line breaks and tabs allowed when multiline).
func hasControlChars(s string, multiline bool) bool {
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\r' || r == '\t')) {
			return true
		}
	}
	return false
}

// ClaimService holds claim codes: creating, listing, previewing and redeeming them.
type ClaimService struct{ a *App }

// Claims returns the claim codes.
func (a *App) Claims() *ClaimService { return a.svc.claims }

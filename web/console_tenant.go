package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"studio/models"
)

// The tenant's management pages: pipeline hooks, member accounts, claim codes and the callback secret.
// Each calls the core operation of its REST endpoint with the session's identity.

// hooksView is the pipeline hooks page.
type hooksView struct {
	Chrome     chrome
	Hooks      []models.HookView
	Form       models.HookInput
	Enabled    bool
	Error      string
	ImageSlugs []string // slugs of image templates the tenant can bind, for the datalist
	HookSlugs  []string // slugs of copy and video templates
}

// hooksPage lists the tenant's hooks (GET /api/template-hooks) with a form to add one.
func (c *Console) hooksPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := hooksView{Enabled: true, Form: models.HookInput{HookType: models.HookArticle}}
	return c.renderHooks(w, r, v, http.StatusOK, p)
}

// renderHooks reads the hooks and the template slugs and renders the page.
func (c *Console) renderHooks(w http.ResponseWriter, r *http.Request, v *visit, status int, p hooksView) error {
	ctx := r.Context()
	p.Chrome = c.chrome(v, "Pipeline hooks", consolePrefix+"/hooks")
	p.Chrome.Notice = notice(r, v)
	var err error
	if p.Hooks, err = c.svc.Accounts().ListHooks(ctx, v.id, ""); err != nil {
		return err
	}
	tpls, err := c.svc.Templates().ListTemplates(ctx, v.id, models.TemplateFilter{})
	if err != nil {
		return err
	}
	for _, t := range tpls {
		if t.Slug == nil {
			continue
		}
		if t.Type == models.TemplateImage {
			p.ImageSlugs = append(p.ImageSlugs, *t.Slug)
		} else {
			p.HookSlugs = append(p.HookSlugs, *t.Slug)
		}
	}
	videos, err := c.svc.Templates().ListVideoTemplates(ctx, v.id, "")
	if err != nil {
		return err
	}
	for _, t := range videos {
		p.HookSlugs = append(p.HookSlugs, t.Slug)
	}
	c.render(w, r, status, hooksPage(p))
	return nil
}

// saveHook adds a hook or updates the one of the same image template and type (POST /api/template-hooks).
func (c *Console) saveHook(w http.ResponseWriter, r *http.Request, v *visit) error {
	enabled := r.PostFormValue("enabled") != ""
	in := models.HookInput{ImageTemplateSlug: r.PostFormValue("image_template_slug"), HookType: r.PostFormValue("hook_type"),
		HookTemplateSlug: r.PostFormValue("hook_template_slug"), Enabled: &enabled, Note: r.PostFormValue("note")}
	if _, _, err := c.svc.Accounts().UpsertHook(r.Context(), v.id, in); err != nil {
		status, msg := pageError(r, err)
		return c.renderHooks(w, r, v, status, hooksView{Form: in, Enabled: enabled, Error: msg})
	}
	seeOther(w, r, consolePrefix+"/hooks", "hook-saved")
	return nil
}

// changeHook enables, disables (PATCH /api/template-hooks) or deletes (DELETE) one hook.
func (c *Console) changeHook(w http.ResponseWriter, r *http.Request, v *visit) error {
	id := mux.Vars(r)["id"]
	switch r.PostFormValue("op") {
	case "delete":
		if err := c.svc.Accounts().DeleteHook(r.Context(), v.id, id); err != nil {
			return err
		}
		seeOther(w, r, consolePrefix+"/hooks", "hook-deleted")
	case "enable", "disable":
		enabled := r.PostFormValue("op") == "enable"
		if _, err := c.svc.Accounts().UpdateHook(r.Context(), v.id, models.HookPatch{ID: id, Enabled: &enabled}); err != nil {
			return err
		}
		seeOther(w, r, consolePrefix+"/hooks", "hook-saved")
	default:
		return models.Invalid("unknown operation")
	}
	return nil
}

// membersView is the member accounts page.
type membersView struct {
	Chrome   chrome
	Pool     *models.PoolView
	Accounts []models.AccountView
	NewKey   *newKey
	Form     memberForm
	Error    string
	ErrorFor string // the account whose form failed, or "" for the create form
}

// newKey is a key shown once, after its creation or a rekey.
type newKey struct {
	For string
	Key string
}

// memberForm is the create form's content.
type memberForm struct {
	Email, Nickname, Mode, Credits string
}

// membersPage lists the tenant's member accounts (GET /api/tenant-accounts) with the create form.
func (c *Console) membersPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := membersView{Form: memberForm{Mode: "shared"}, NewKey: newKeyOf(c.takeFlash(w, r))}
	return c.renderMembers(w, r, v, http.StatusOK, p)
}

// renderMembers reads the accounts and the pool and renders the page.
func (c *Console) renderMembers(w http.ResponseWriter, r *http.Request, v *visit, status int, p membersView) error {
	ctx := r.Context()
	p.Chrome = c.chrome(v, "Members", consolePrefix+"/members")
	if p.Chrome.Notice == "" {
		p.Chrome.Notice = notice(r, v)
	}
	var err error
	if p.Accounts, err = c.svc.Accounts().Accounts(ctx, v.id); err != nil {
		return err
	}
	if p.Pool, err = c.svc.Credits().Pool(ctx, v.id); err != nil {
		return err
	}
	c.render(w, r, status, membersPage(p))
	return nil
}

// createMember creates a member account (POST /api/tenant-accounts action create) and shows its key once.
func (c *Console) createMember(w http.ResponseWriter, r *http.Request, v *visit) error {
	f := memberForm{Email: strings.TrimSpace(r.PostFormValue("email")), Nickname: r.PostFormValue("nickname"),
		Mode: r.PostFormValue("mode"), Credits: strings.TrimSpace(r.PostFormValue("credits"))}
	in := models.AccountInput{Email: f.Email, Nickname: f.Nickname}
	shared := f.Mode != "dedicated"
	in.Shared = &shared
	if !shared {
		n, err := formCredits(f.Credits)
		if err != nil {
			return c.renderMembers(w, r, v, http.StatusBadRequest, membersView{Form: f, Error: err.Error()})
		}
		in.Credits = &n
	}
	acc, err := c.svc.Accounts().CreateAccount(r.Context(), v.id, in)
	if err != nil {
		status, msg := pageError(r, err)
		return c.renderMembers(w, r, v, status, membersView{Form: f, Error: msg})
	}
	if acc.APIKey != nil {
		c.setFlash(w, flash{For: acc.Email, Key: *acc.APIKey})
	}
	seeOther(w, r, consolePrefix+"/members", "member-created")
	return nil
}

// changeMember sets a member's quota, rekeys it (showing the new key once), or disables or enables it
// (POST /api/tenant-accounts actions set-quota, rekey and toggle).
func (c *Console) changeMember(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	accountID := mux.Vars(r)["id"]
	fail := func(err error) error {
		status, msg := pageError(r, err)
		return c.renderMembers(w, r, v, status, membersView{Form: memberForm{Mode: "shared"}, Error: msg, ErrorFor: accountID})
	}
	switch r.PostFormValue("op") {
	case "quota":
		var q models.QuotaInput
		if r.PostFormValue("mode") == "dedicated" {
			n, err := formCredits(r.PostFormValue("credits"))
			if err != nil {
				return fail(err)
			}
			q.Credits = &n
		} else {
			shared := true
			q.Shared = &shared
		}
		if _, err := c.svc.Accounts().SetAccountQuota(ctx, v.id, accountID, q); err != nil {
			return fail(err)
		}
		seeOther(w, r, consolePrefix+"/members", "quota-set")
	case "rekey":
		key, err := c.svc.Accounts().RekeyAccount(ctx, v.id, accountID)
		if err != nil {
			return fail(err)
		}
		accs, err := c.svc.Accounts().Accounts(ctx, v.id)
		if err != nil {
			return err
		}
		f := flash{Key: key}
		for _, a := range accs {
			if a.ID == accountID {
				f.For = a.Email
			}
		}
		c.setFlash(w, f)
		seeOther(w, r, consolePrefix+"/members", "member-rekeyed")
	case "disable", "enable":
		disabled := r.PostFormValue("op") == "disable"
		if err := c.svc.Accounts().ToggleAccount(ctx, v.id, accountID, disabled); err != nil {
			return fail(err)
		}
		if disabled {
			seeOther(w, r, consolePrefix+"/members", "member-disabled")
		} else {
			seeOther(w, r, consolePrefix+"/members", "member-enabled")
		}
	default:
		return fail(models.Invalid("unknown operation"))
	}
	return nil
}

// formCredits reads a credits input: a whole number, at least 0.
func formCredits(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, models.Invalid("credits must be a whole number, 0 or more")
	}
	return n, nil
}

// claimsView is the claim codes page of a tenant.
type claimsView struct {
	Chrome    chrome
	Templates []claimChoice
	Codes     []models.ClaimCodeView
	Created   *models.ClaimCodeView
	Form      claimForm
	Error     string
	Spendable int64
}

// claimChoice is a platform template that a code may bundle.
type claimChoice struct {
	ID, Name, Kind, Thumb string
	Checked               bool
}

// claimForm is the create form's content.
type claimForm struct {
	TemplateIDs                          []string
	Credits, Note, TutorialURL, Tutorial string
}

// claimsPage lists the tenant's claim codes with the form that creates one.
func (c *Console) claimsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	return c.renderClaims(w, r, v, http.StatusOK, claimsView{})
}

// createdCode is the code that ?created= names among the listed codes, or nil.
func createdCode(r *http.Request, codes []models.ClaimCodeView) *models.ClaimCodeView {
	code := r.URL.Query().Get("created")
	for i := range codes {
		if code != "" && codes[i].Code == code {
			return &codes[i]
		}
	}
	return nil
}

// renderClaims reads the platform templates, the codes and the pool, and renders the page.
func (c *Console) renderClaims(w http.ResponseWriter, r *http.Request, v *visit, status int, p claimsView) error {
	ctx := r.Context()
	p.Chrome = c.chrome(v, "Claim codes", consolePrefix+"/claims")
	p.Chrome.Notice = notice(r, v)
	checked := map[string]bool{}
	for _, id := range p.Form.TemplateIDs {
		checked[id] = true
	}
	tpls, err := c.svc.Templates().ListTemplates(ctx, v.id, models.TemplateFilter{Source: models.SourcePlatform})
	if err != nil {
		return err
	}
	for _, t := range tpls {
		ch := claimChoice{ID: t.ID, Name: t.ZhName, Kind: kindName(t.Type), Checked: checked[t.ID]}
		if t.ImageColumns != nil && len(t.SampleImages) > 0 {
			ch.Thumb = t.SampleImages[0]
		}
		p.Templates = append(p.Templates, ch)
	}
	videos, err := c.svc.Templates().ListVideoTemplates(ctx, v.id, models.SourcePlatform)
	if err != nil {
		return err
	}
	for _, t := range videos {
		ch := claimChoice{ID: t.ID, Name: t.ZhName, Kind: "video", Checked: checked[t.ID]}
		if t.SampleCoverImage != nil {
			ch.Thumb = *t.SampleCoverImage
		}
		p.Templates = append(p.Templates, ch)
	}
	if p.Codes, err = c.svc.Claims().ClaimCodesFor(ctx, v.id); err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		p.Created = createdCode(r, p.Codes)
	}
	pool, err := c.svc.Credits().Pool(ctx, v.id)
	if err != nil {
		return err
	}
	p.Spendable = pool.Spendable
	c.render(w, r, status, claimsPage(p))
	return nil
}

// createClaim creates a claim code (POST /api/tenant-claims) and shows its reply text to copy.
func (c *Console) createClaim(w http.ResponseWriter, r *http.Request, v *visit) error {
	f := claimForm{TemplateIDs: r.PostForm["template_id"], Credits: strings.TrimSpace(r.PostFormValue("credits")),
		Note: r.PostFormValue("note"), TutorialURL: r.PostFormValue("tutorial_pdf_url"), Tutorial: r.PostFormValue("tutorial_pdf_title")}
	in := models.ClaimInput{TemplateIDs: f.TemplateIDs, Note: f.Note, TutorialPDFURL: f.TutorialURL, TutorialPDFTitle: f.Tutorial}
	if f.Credits != "" {
		n, err := strconv.ParseInt(f.Credits, 10, 64)
		if err != nil {
			return c.renderClaims(w, r, v, http.StatusBadRequest, claimsView{Form: f, Error: "credits must be a positive whole number"})
		}
		in.Credits = &n
	}
	out, err := c.svc.Claims().CreateClaimCode(r.Context(), v.id, in)
	if err != nil {
		status, msg := pageError(r, err)
		return c.renderClaims(w, r, v, status, claimsView{Form: f, Error: msg})
	}
	seeOther(w, r, consolePrefix+"/claims?created="+url.QueryEscape(out.Code), "claim-created")
	return nil
}

// settingsView shows the tenant's callback secret.
type settingsView struct {
	Chrome         chrome
	TenantID       string
	TenantName     string
	CallbackSecret string
}

// settingsPage shows the secret that signs the tenant's callbacks (decision D6).
func (c *Console) settingsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	t, err := c.svc.Accounts().TenantSettings(r.Context(), v.id)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, settingsPage(settingsView{Chrome: c.chrome(v, "Settings", consolePrefix+"/settings"),
		TenantID: t.ID, TenantName: t.Name, CallbackSecret: t.CallbackSecret}))
	return nil
}

// maskKey shows the start and the end of a key only.
func maskKey(k *string) string {
	if k == nil {
		return "(unavailable: rekey to issue a new one)"
	}
	s := *k
	if len(s) <= len(models.KeyPrefix)+6 {
		return s
	}
	return s[:len(models.KeyPrefix)+2] + "…" + s[len(s)-4:]
}

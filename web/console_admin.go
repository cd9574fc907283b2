package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"studio/models"
)

// The platform administrator's console. Every change goes through the administrator actions
// dispatcher (App.Admin.Run) with the same bodies as POST /api/admin and `studio admin`.

// registerAdmin adds the administrator pages under /admin.
func (c *Console) registerAdmin(r *mux.Router) {
	admin := models.CapAdminister
	get, post := http.MethodGet, http.MethodPost
	r.HandleFunc(adminPrefix, c.page(admin, c.tenantsPage)).Methods(get)
	r.HandleFunc(adminPrefix+"/tenants", c.page(admin, c.createTenant)).Methods(post)
	r.HandleFunc(adminPrefix+"/tenants/{id}", c.page(admin, c.changeTenant)).Methods(post)
	r.HandleFunc(adminPrefix+"/upstreams", c.page(admin, c.upstreamsPage)).Methods(get)
	r.HandleFunc(adminPrefix+"/upstreams/{name}", c.page(admin, c.changeUpstream)).Methods(post)
	r.HandleFunc(adminPrefix+"/claims", c.page(admin, c.adminClaimsPage)).Methods(get)
	r.HandleFunc(adminPrefix+"/claims/{code}", c.page(admin, c.voidClaim)).Methods(post)
	r.HandleFunc(adminPrefix+"/invitations", c.page(admin, c.invitationsPage)).Methods(get)
	r.HandleFunc(adminPrefix+"/invitations", c.page(admin, c.createInvitations)).Methods(post)
	c.registerTemplates(r, adminPrefix)
}

// runAdmin runs one administrator action with a body and decodes its answer into out (when not nil).
func (c *Console) runAdmin(r *http.Request, v *visit, body map[string]any, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return models.Internal("admin: encode action", err)
	}
	res, err := c.svc.Admin.Run(r.Context(), v.id, raw)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return models.Internal("admin: encode answer", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return models.Internal("admin: decode answer", err)
	}
	return nil
}

// tenantsView is the tenants page.
type tenantsView struct {
	Chrome   chrome
	Tenants  []models.Tenant
	NewKey   *newKey
	Error    string
	ErrorFor string
	Form     tenantForm
}

// tenantForm is the create form's content.
type tenantForm struct {
	Name, Credits string
	Unmetered     bool
}

// tenantsPage lists the tenants with their pools and bindings.
func (c *Console) tenantsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	return c.renderTenants(w, r, v, http.StatusOK, tenantsView{NewKey: newKeyOf(c.takeFlash(w, r))})
}

// renderTenants reads the tenants and renders the page.
func (c *Console) renderTenants(w http.ResponseWriter, r *http.Request, v *visit, status int, p tenantsView) error {
	p.Chrome = c.chrome(v, "Tenants", adminPrefix)
	if p.Chrome.Notice == "" {
		p.Chrome.Notice = notice(r, v)
	}
	var err error
	if p.Tenants, err = c.svc.Accounts().Tenants(r.Context(), v.id); err != nil {
		return err
	}
	c.render(w, r, status, tenantsPage(p))
	return nil
}

// createTenant runs tenant-create and shows the new tenant's key once.
func (c *Console) createTenant(w http.ResponseWriter, r *http.Request, v *visit) error {
	f := tenantForm{Name: strings.TrimSpace(r.PostFormValue("name")), Credits: strings.TrimSpace(r.PostFormValue("credits")),
		Unmetered: r.PostFormValue("unmetered") != ""}
	body := map[string]any{"action": "tenant-create", "name": f.Name, "unmetered": f.Unmetered}
	if f.Credits != "" {
		n, err := formCredits(f.Credits)
		if err != nil {
			return c.renderTenants(w, r, v, http.StatusBadRequest, tenantsView{Form: f, Error: err.Error()})
		}
		body["credits"] = n
	}
	var out struct {
		Tenant struct{ ID, Name string } `json:"tenant"`
		APIKey string                    `json:"api_key"`
	}
	if err := c.runAdmin(r, v, body, &out); err != nil {
		status, msg := pageError(r, err)
		return c.renderTenants(w, r, v, status, tenantsView{Form: f, Error: msg})
	}
	c.setFlash(w, flash{For: out.Tenant.Name, Key: out.APIKey})
	seeOther(w, r, adminPrefix, "tenant-created")
	return nil
}

// changeTenant runs tenant-credit, tenant-rekey (showing the new key once) or tenant-bind.
func (c *Console) changeTenant(w http.ResponseWriter, r *http.Request, v *visit) error {
	id := mux.Vars(r)["id"]
	fail := func(err error) error {
		status, msg := pageError(r, err)
		return c.renderTenants(w, r, v, status, tenantsView{Error: msg, ErrorFor: id})
	}
	switch r.PostFormValue("op") {
	case "credit":
		n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("credits")), 10, 64)
		if err != nil {
			return fail(models.Invalid("credits must be a whole number; negative removes credits"))
		}
		if err := c.runAdmin(r, v, map[string]any{"action": "tenant-credit", "tenant_id": id, "credits": n}, nil); err != nil {
			return fail(err)
		}
		seeOther(w, r, adminPrefix, "tenant-credited")
	case "rekey":
		var out struct {
			APIKey string `json:"api_key"`
		}
		if err := c.runAdmin(r, v, map[string]any{"action": "tenant-rekey", "tenant_id": id}, &out); err != nil {
			return fail(err)
		}
		f := flash{For: id, Key: out.APIKey}
		if t, err := c.svc.Accounts().TenantByID(r.Context(), v.id, id); err == nil {
			f.For = t.Name
		}
		c.setFlash(w, f)
		seeOther(w, r, adminPrefix, "tenant-rekeyed")
	case "bind":
		body := map[string]any{"action": "tenant-bind", "tenant_id": id, "model": strings.TrimSpace(r.PostFormValue("model"))}
		if err := c.runAdmin(r, v, body, nil); err != nil {
			return fail(err)
		}
		seeOther(w, r, adminPrefix, "tenant-bound")
	default:
		return fail(models.Invalid("unknown operation"))
	}
	return nil
}

// upstreamRow is one upstream of upstream-list: its health score, state and the reason of its state.
type upstreamRow struct {
	Name        string     `json:"name"`
	Provider    string     `json:"provider"`
	Media       string     `json:"media"`
	Family      string     `json:"family"`
	Score       float64    `json:"score"`
	Weight      float64    `json:"weight"`
	SuccessRate float64    `json:"success_rate"`
	Attempts    int        `json:"attempts"`
	P95MS       int64      `json:"p95_ms"`
	State       string     `json:"state"`
	Reason      string     `json:"reason"`
	Since       *time.Time `json:"since"`
}

// upstreamsView is the upstreams page.
type upstreamsView struct {
	Chrome    chrome
	Upstreams []upstreamRow
}

// upstreamsPage lists the upstreams (upstream-list).
func (c *Console) upstreamsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	var out struct {
		Upstreams []upstreamRow `json:"upstreams"`
	}
	if err := c.runAdmin(r, v, map[string]any{"action": "upstream-list"}, &out); err != nil {
		return err
	}
	p := upstreamsView{Chrome: c.chrome(v, "Upstreams", adminPrefix+"/upstreams"), Upstreams: out.Upstreams}
	p.Chrome.Notice = notice(r, v)
	c.render(w, r, http.StatusOK, upstreamsPage(p))
	return nil
}

// changeUpstream disables or enables an upstream (upstream-disable, upstream-enable).
func (c *Console) changeUpstream(w http.ResponseWriter, r *http.Request, v *visit) error {
	name := mux.Vars(r)["name"]
	switch op := r.PostFormValue("op"); op {
	case "disable", "enable":
		if err := c.runAdmin(r, v, map[string]any{"action": "upstream-" + op, "name": name}, nil); err != nil {
			return err
		}
		seeOther(w, r, adminPrefix+"/upstreams", "upstream-"+op+"d")
	default:
		return models.Invalid("unknown operation")
	}
	return nil
}

// adminClaimsView is the administrator's claim codes page.
type adminClaimsView struct {
	Chrome chrome
	Codes  []models.ClaimCodeView
}

// adminClaimsPage lists every claim code.
func (c *Console) adminClaimsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	codes, err := c.svc.Claims().ClaimCodesFor(r.Context(), v.id)
	if err != nil {
		return err
	}
	p := adminClaimsView{Chrome: c.chrome(v, "Claim codes", adminPrefix+"/claims"), Codes: codes}
	p.Chrome.Notice = notice(r, v)
	c.render(w, r, http.StatusOK, adminClaimsPage(p))
	return nil
}

// voidClaim voids a claim code (promo-claim-disable).
func (c *Console) voidClaim(w http.ResponseWriter, r *http.Request, v *visit) error {
	if err := c.runAdmin(r, v, map[string]any{"action": "promo-claim-disable", "code": mux.Vars(r)["code"]}, nil); err != nil {
		return err
	}
	seeOther(w, r, adminPrefix+"/claims", "claim-disabled")
	return nil
}

// invitationsView is the invitations page: new codes are shown once, after creation.
type invitationsView struct {
	Chrome chrome
	Codes  []string
	Count  string
	Error  string
}

// invitationsPage shows the form that creates invitation codes.
func (c *Console) invitationsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := invitationsView{Chrome: c.chrome(v, "Invitations", adminPrefix+"/invitations"), Count: "1"}
	p.Chrome.Notice = notice(r, v)
	if f := c.takeFlash(w, r); f != nil {
		p.Codes = f.Codes
	}
	c.render(w, r, http.StatusOK, invitationsPage(p))
	return nil
}

// createInvitations runs invitation-create and shows the codes.
func (c *Console) createInvitations(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := invitationsView{Chrome: c.chrome(v, "Invitations", adminPrefix+"/invitations"), Count: strings.TrimSpace(r.PostFormValue("count"))}
	n, err := strconv.Atoi(p.Count)
	if err == nil {
		var out struct {
			Codes []string `json:"codes"`
		}
		if err = c.runAdmin(r, v, map[string]any{"action": "invitation-create", "count": n}, &out); err == nil {
			c.setFlash(w, flash{Codes: out.Codes})
			seeOther(w, r, adminPrefix+"/invitations", "invitations-made")
			return nil
		}
	} else {
		err = models.Invalid("count must be a whole number between 1 and 100")
	}
	status, msg := pageError(r, err)
	p.Error = msg
	c.render(w, r, status, invitationsPage(p))
	return nil
}

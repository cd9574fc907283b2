package rest

import (
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerCredits adds balance, pool, stats, usage and member accounts.
func (s *Server) registerCredits(api *mux.Router) {
	api.HandleFunc("/balance", s.authed(s.balance)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-pool", s.authed(s.tenantPool)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-stats", s.authed(s.tenantStats)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-usage", s.authed(s.tenantUsage)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-accounts", s.authed(s.tenantAccounts)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-accounts", s.authed(s.idempotent("tenant-accounts", s.tenantAccountAction, isCreateAction))).Methods(http.MethodPost)
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.svc.Credits().Balance(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) tenantPool(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.svc.Credits().Pool(r.Context(), id)
	if err != nil {
		return err
	}
	writeOK(w, v)
	return nil
}

// tenantStats answers GET /api/tenant-stats?hours=; a non-numeric hours is 0, which the core turns into the default.
func (s *Server) tenantStats(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.svc.Accounts().TenantStats(r.Context(), id, queryInt(r, "hours"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// tenantUsage answers GET /api/tenant-usage?days=; a non-numeric days is 0, which the core turns into the default.
func (s *Server) tenantUsage(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.svc.Accounts().TenantUsage(r.Context(), id, queryInt(r, "days"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// queryInt returns an integer query parameter, 0 when absent or not an integer.
func queryInt(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return 0
	}
	return n
}

func (s *Server) tenantAccounts(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	accounts, err := s.svc.Accounts().Accounts(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "accounts": accounts})
	return nil
}

// accountAction is the body of POST /api/tenant-accounts: an action and the fields it uses.
type accountAction struct {
	Action    string `json:"action"`
	AccountID string `json:"account_id"`
	models.AccountInput
	Disabled *bool `json:"disabled"`
}

// tenantAccountAction dispatches POST /api/tenant-accounts {action, ...} to the core.
func (s *Server) tenantAccountAction(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in accountAction
	if err := decode(r, &in); err != nil {
		return err
	}
	ctx := r.Context()
	switch in.Action {
	case "create":
		acc, err := s.svc.Accounts().CreateAccount(ctx, id, in.AccountInput)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "account": acc})
	case "set-quota":
		acc, err := s.svc.Accounts().SetAccountQuota(ctx, id, in.AccountID, models.QuotaInput{Shared: in.Shared, Credits: in.Credits})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "account": acc})
	case "rekey":
		key, err := s.svc.Accounts().RekeyAccount(ctx, id, in.AccountID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "api_key": key})
	case "toggle":
		if in.Disabled == nil {
			return models.Invalid("disabled (true or false) is required")
		}
		if err := s.svc.Accounts().ToggleAccount(ctx, id, in.AccountID, *in.Disabled); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "disabled": *in.Disabled})
	case "":
		return models.Invalid("action is required: create, set-quota, rekey or toggle")
	default:
		return models.Invalid("unknown action %q: use create, set-quota, rekey or toggle", in.Action)
	}
	return nil
}

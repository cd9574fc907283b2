package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
)

// AdminParam describes one body field of an administrator action; the CLI makes a flag of it.
type AdminParam struct {
	Name     string
	Type     string // string | int | bool | float
	Usage    string
	Required bool
}

// AdminAction is one platform administration action of POST /api/admin and `studio admin`.
type AdminAction struct {
	Name    string
	Summary string
	Params  []AdminParam
	Run     func(ctx context.Context, body json.RawMessage) (any, error)
}

// AdminActions is the one dispatcher behind POST /api/admin and the `studio admin` subcommands.
type AdminActions struct {
	actions map[string]AdminAction
}

// Register adds an action; later packages (routing, claims, templates) register theirs at wiring.
func (r *AdminActions) Register(a AdminAction) {
	if _, dup := r.actions[a.Name]; dup {
		panic("admin action registered twice: " + a.Name)
	}
	r.actions[a.Name] = a
}

// List returns every action sorted by name.
func (r *AdminActions) List() []AdminAction {
	out := make([]AdminAction, 0, len(r.actions))
	for _, a := range r.actions {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Run dispatches a body {action, ...} to its action, for the platform administrator (the operator at the
// machine runs it as Operator()).
func (r *AdminActions) Run(ctx context.Context, id *Identity, body []byte) (any, error) {
	if err := id.Require(CapAdminister); err != nil {
		return nil, err
	}
	var head struct {
		Action string `json:"action"`
	}
	if err := DecodeJSON(body, &head); err != nil {
		return nil, err
	}
	if head.Action == "" {
		return nil, Invalid("action is required")
	}
	a, ok := r.actions[head.Action]
	if !ok {
		return nil, Invalid("unknown action %q", head.Action)
	}
	return a.Run(ctx, body)
}

// DecodeJSON decodes one JSON value into v; malformed input is KindInvalid with a message naming the problem.
func DecodeJSON(body []byte, v any) error {
	if len(trimJSONSpace(body)) == 0 {
		return Invalid("request body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			if te.Field != "" {
				return Invalid("invalid JSON: field %s must be %s", te.Field, jsonTypeName(te.Type.Kind().String()))
			}
			return Invalid("invalid JSON: expected an object")
		case errors.As(err, &se):
			return Invalid("invalid JSON: syntax error at byte %d", se.Offset)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return Invalid("invalid JSON: unexpected end of input")
		}
		return Invalid("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if rest := trimJSONSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return Invalid("invalid JSON: unexpected data after the value at byte %d", dec.InputOffset())
	}
	return nil
}

// trimJSONSpace trims JSON's white space (space, tab, line feed, carriage return) and nothing else:
// bytes.TrimSpace would also drop \v, \f and Unicode spaces, which JSON does not allow.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\n\r")
}

func jsonTypeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "bool":
		return "a boolean"
	case kind == "string":
		return "a string"
	case kind == "slice":
		return "an array"
	}
	return "an object"
}

func adminRun[T any](fn func(ctx context.Context, in T) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, body json.RawMessage) (any, error) {
		var in T
		if err := DecodeJSON(body, &in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}

// NewAdminActions returns the core's administrator actions bound to a; a may be nil to only list them.
func NewAdminActions(a *App) *AdminActions {
	r := &AdminActions{actions: map[string]AdminAction{}}
	r.Register(AdminAction{
		Name: "tenant-create", Summary: "create a tenant and print its API key once",
		Params: []AdminParam{{"name", "string", "tenant name", true}, {"credits", "int", "opening credits", false},
			{"unmetered", "bool", "no credit limit", false}, {"quota_monthly", "int", "credits per local calendar month", false},
			{"markup", "float", "price factor for charged_cny (default 1)", false}},
		Run: adminRun(func(ctx context.Context, in TenantInput) (any, error) {
			t, key, err := a.Accounts().CreateTenant(ctx, in)
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true, "tenant": map[string]any{"id": t.ID, "name": t.Name}, "api_key": key}, nil
		}),
	})
	r.Register(AdminAction{
		Name: "tenant-credit", Summary: "add (or with a negative value remove) credits of a tenant's pool",
		Params: []AdminParam{{"tenant_id", "string", "tenant id", true}, {"credits", "int", "signed delta", true}},
		Run: adminRun(func(ctx context.Context, in struct {
			TenantID string `json:"tenant_id"`
			Credits  int64  `json:"credits"`
		}) (any, error) {
			if in.TenantID == "" {
				return nil, Invalid("tenant_id is required")
			}
			t, err := a.Credits().CreditTenant(ctx, in.TenantID, in.Credits)
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true, "balance": t.Balance(), "spendable": t.Spendable, "reserved": t.Reserved}, nil
		}),
	})
	r.Register(AdminAction{
		Name: "tenant-rekey", Summary: "replace a tenant's API key; the old key fails at once",
		Params: []AdminParam{{"tenant_id", "string", "tenant id", true}},
		Run: adminRun(func(ctx context.Context, in struct {
			TenantID string `json:"tenant_id"`
		}) (any, error) {
			if in.TenantID == "" {
				return nil, Invalid("tenant_id is required")
			}
			key, err := a.Accounts().RekeyTenant(ctx, in.TenantID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true, "api_key": key}, nil
		}),
	})
	r.Register(AdminAction{
		Name: "tenant-bind", Summary: "restrict a tenant to a model family or channel (empty model unbinds)",
		Params: []AdminParam{{"tenant_id", "string", "tenant id", true}, {"model", "string", "family or channel name; empty to unbind", false}},
		Run: adminRun(func(ctx context.Context, in struct {
			TenantID string `json:"tenant_id"`
			Model    string `json:"model"`
		}) (any, error) {
			if in.TenantID == "" {
				return nil, Invalid("tenant_id is required")
			}
			if in.Model != "" {
				if err := a.checkBinding(in.Model); err != nil {
					return nil, err
				}
			}
			if err := a.Accounts().BindTenant(ctx, in.TenantID, in.Model); err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		}),
	})
	r.Register(AdminAction{
		Name: "user-credit", Summary: "add or remove credits of a personal account",
		Params: []AdminParam{{"email", "string", "e-mail of the account", false}, {"user_id", "string", "or its id", false},
			{"credits", "int", "signed delta", true}},
		Run: adminRun(func(ctx context.Context, in struct {
			Email   string `json:"email"`
			UserID  string `json:"user_id"`
			Credits int64  `json:"credits"`
		}) (any, error) {
			id := in.UserID
			if id == "" {
				if in.Email == "" {
					return nil, Invalid("email or user_id is required")
				}
				u, err := a.Accounts().UserByEmail(ctx, in.Email)
				if err != nil {
					return nil, err
				}
				id = u.ID
			}
			after, err := a.Credits().CreditUser(ctx, id, in.Credits, "admin_credit", "", "administrator credit")
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true, "credits": after}, nil
		}),
	})
	r.Register(AdminAction{
		Name: "invitation-create", Summary: "create single-use invitation codes for e-mail registration",
		Params: []AdminParam{{"count", "int", "how many codes (default 1, at most 100)", false}},
		Run: adminRun(func(ctx context.Context, in struct {
			Count *int `json:"count"`
		}) (any, error) {
			n := 1
			if in.Count != nil {
				n = *in.Count
			}
			codes, err := a.Accounts().CreateInvitations(ctx, n)
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true, "codes": codes}, nil
		}),
	})
	registerTemplateAdmin(r, a)
	registerClaimAdmin(r, a)
	return r
}

// CreateInvitations creates n single-use invitation codes.
func (acs *AccountService) CreateInvitations(ctx context.Context, n int) ([]string, error) {
	a := acs.a
	if n < 1 || n > 100 {
		return nil, Invalid("count must be between 1 and 100")
	}
	codes := make([]string, n)
	rows := make([]Invitation, n)
	for i := range codes {
		codes[i] = "inv-" + RandomString(16, keyAlphabet)
		rows[i] = Invitation{Code: codes[i], CreatedAt: a.Now()}
	}
	if err := a.DB.WithContext(ctx).Create(&rows).Error; err != nil {
		return nil, Internal("invitation: create", err)
	}
	return codes, nil
}

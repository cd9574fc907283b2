package rest

import (
	"bytes"
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerTemplates adds the routes of templates, skills, video templates and pipeline hooks.
// Templates and skills are open to every identity (the administrator manages platform templates);
// creating and changing templates is refused to member account keys; hooks take the tenant key only.
// There is no DELETE on templates: deletion is the administrator action template-delete.
func (s *Server) registerTemplates(api *mux.Router) {
	all := []models.IdentityKind{models.IdentityTenant, models.IdentityAccount, models.IdentityUser, models.IdentityAdmin}
	authors := []models.IdentityKind{models.IdentityTenant, models.IdentityUser, models.IdentityAdmin}
	api.HandleFunc("/templates", s.authed(s.listTemplates, all...)).Methods(http.MethodGet)
	api.HandleFunc("/templates", s.authed(s.createTemplate, authors...)).Methods(http.MethodPost)
	api.HandleFunc("/templates", s.authed(s.updateTemplate, authors...)).Methods(http.MethodPatch)
	api.HandleFunc("/video-templates", s.authed(s.listVideoTemplates, all...)).Methods(http.MethodGet)
	api.HandleFunc("/video-templates", s.authed(s.createVideoTemplate, authors...)).Methods(http.MethodPost)
	api.HandleFunc("/video-templates", s.authed(s.updateVideoTemplate, authors...)).Methods(http.MethodPatch)
	api.HandleFunc("/skills", s.authed(s.listSkills, all...)).Methods(http.MethodGet)
	api.HandleFunc("/template-hooks", s.authed(s.listHooks, models.IdentityTenant)).Methods(http.MethodGet)
	api.HandleFunc("/template-hooks", s.authed(s.upsertHook, models.IdentityTenant)).Methods(http.MethodPost)
	api.HandleFunc("/template-hooks", s.authed(s.updateHook, models.IdentityTenant)).Methods(http.MethodPatch)
	api.HandleFunc("/template-hooks", s.authed(s.deleteHook, models.IdentityTenant)).Methods(http.MethodDelete)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	q := r.URL.Query()
	rows, err := s.app.ListTemplates(r.Context(), id, models.TemplateFilter{Type: q.Get("type"), Source: q.Get("source")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "templates": rows})
	return nil
}

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in models.TemplateInput
	if err := decode(r, &in); err != nil {
		return err
	}
	t, err := s.app.CreateTemplate(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) updateTemplate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var p models.TemplatePatch
	if err := decode(r, &p); err != nil {
		return err
	}
	t, err := s.app.UpdateTemplate(r.Context(), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) listVideoTemplates(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	rows, err := s.app.ListVideoTemplates(r.Context(), id, r.URL.Query().Get("source"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "templates": rows})
	return nil
}

func (s *Server) createVideoTemplate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in models.VideoTemplateInput
	if err := decode(r, &in); err != nil {
		return err
	}
	t, err := s.app.CreateVideoTemplate(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) updateVideoTemplate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var p models.VideoTemplatePatch
	if err := decode(r, &p); err != nil {
		return err
	}
	t, err := s.app.UpdateVideoTemplate(r.Context(), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	skills, err := s.app.ListSkills(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "skills": skills})
	return nil
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	hooks, err := s.app.ListHooks(r.Context(), id, r.URL.Query().Get("image_template_slug"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "hooks": hooks})
	return nil
}

func (s *Server) upsertHook(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in models.HookInput
	if err := decode(r, &in); err != nil {
		return err
	}
	hook, created, err := s.app.UpsertHook(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "hook": hook, "created": created})
	return nil
}

func (s *Server) updateHook(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var p models.HookPatch
	if err := decode(r, &p); err != nil {
		return err
	}
	hook, err := s.app.UpdateHook(r.Context(), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "hook": hook})
	return nil
}

// deleteHook takes the id from ?id= or, when absent, from a JSON body {id}.
func (s *Server) deleteHook(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	hookID := r.URL.Query().Get("id")
	if hookID == "" {
		raw, err := readBody(r, maxJSONBody)
		if err != nil {
			return err
		}
		var body struct {
			ID string `json:"id"`
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := models.DecodeJSON(raw, &body); err != nil {
				return err
			}
		}
		hookID = body.ID
	}
	if err := s.app.DeleteHook(r.Context(), id, hookID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}

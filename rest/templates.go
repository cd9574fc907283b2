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
	api.HandleFunc("/templates", s.authed(s.listTemplates)).Methods(http.MethodGet)
	api.HandleFunc("/templates", s.authed(s.createTemplate)).Methods(http.MethodPost)
	api.HandleFunc("/templates", s.authed(s.updateTemplate)).Methods(http.MethodPatch)
	api.HandleFunc("/video-templates", s.authed(s.listVideoTemplates)).Methods(http.MethodGet)
	api.HandleFunc("/video-templates", s.authed(s.createVideoTemplate)).Methods(http.MethodPost)
	api.HandleFunc("/video-templates", s.authed(s.updateVideoTemplate)).Methods(http.MethodPatch)
	api.HandleFunc("/skills", s.authed(s.listSkills)).Methods(http.MethodGet)
	api.HandleFunc("/template-hooks", s.authed(s.listHooks)).Methods(http.MethodGet)
	api.HandleFunc("/template-hooks", s.authed(s.upsertHook)).Methods(http.MethodPost)
	api.HandleFunc("/template-hooks", s.authed(s.updateHook)).Methods(http.MethodPatch)
	api.HandleFunc("/template-hooks", s.authed(s.deleteHook)).Methods(http.MethodDelete)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	q := r.URL.Query()
	rows, err := s.svc.Templates().ListTemplates(r.Context(), id, models.TemplateFilter{Type: q.Get("type"), Source: q.Get("source")})
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
	t, err := s.svc.Templates().CreateTemplate(r.Context(), id, in)
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
	t, err := s.svc.Templates().UpdateTemplate(r.Context(), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) listVideoTemplates(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	rows, err := s.svc.Templates().ListVideoTemplates(r.Context(), id, r.URL.Query().Get("source"))
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
	t, err := s.svc.Templates().CreateVideoTemplate(r.Context(), id, in)
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
	t, err := s.svc.Templates().UpdateVideoTemplate(r.Context(), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "template": t})
	return nil
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	skills, err := s.svc.Templates().ListSkills(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "skills": skills})
	return nil
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	hooks, err := s.svc.Accounts().ListHooks(r.Context(), id, r.URL.Query().Get("image_template_slug"))
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
	hook, created, err := s.svc.Accounts().UpsertHook(r.Context(), id, in)
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
	hook, err := s.svc.Accounts().UpdateHook(r.Context(), id, p)
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
	if err := s.svc.Accounts().DeleteHook(r.Context(), id, hookID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}

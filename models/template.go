package models

// registerTemplateAdmin adds the administrator actions on templates (template-delete).
func registerTemplateAdmin(r *AdminActions, a *App) {}

package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/contract"
	"studio/models/media"
)

// Template pages, shared by the tenant console (/console/templates: the caller's own templates and the
// platform's) and the administrator console (/admin/templates: platform templates). Creating and
// changing go through the template core (CreateTemplate, UpdateTemplate) with the signed-in identity,
// so that ownership and validation are exactly the API's.
//
// The editor edits the first generation config of a template (the one generation uses) and keeps the
// others unchanged. Its field editor is a list of rows, one per field of `fields`; each row has the
// field's key, label, type, whether it is required, placeholder, help and, for select fields, the
// options one per line as "value|label" (or just "value"). A row whose key and label are empty is
// dropped. Without JavaScript the "Add a field" button re-renders the form with one more row; with
// htmx it appends a row in place.

// maxSampleUpload bounds an uploaded sample image (the image limit of POST /api/upload-ref).
const maxSampleUpload = media.MaxImageSize

// templatesView is the list of templates.
type templatesView struct {
	Chrome   chrome
	Base     string // /console or /admin
	Type     string
	Rows     []models.TemplateView
	CanWrite bool
}

// templatesPage lists the templates the identity may see (GET /api/templates), by kind.
func (c *Console) templatesPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := templatesView{Chrome: c.chrome(v, "Templates", v.section+"/templates"), Base: v.section,
		Type: r.URL.Query().Get("type"), CanWrite: v.id.May(models.CapWriteTemplates)}
	p.Chrome.Notice = notice(r, v)
	if v.section == adminPrefix {
		p.Chrome.Title = "Platform templates"
	}
	f := models.TemplateFilter{Type: p.Type}
	if v.section == adminPrefix {
		f.Source = models.SourcePlatform
	}
	rows, err := c.svc.Templates().ListTemplates(r.Context(), v.id, f)
	if err != nil {
		return err
	}
	p.Rows = rows
	c.render(w, r, http.StatusOK, templatesPage(p))
	return nil
}

// templateForm is the editor's content: the template's columns, its first generation config and the
// field rows.
type templateForm struct {
	ID             string
	Type           string
	ZhName         string
	Slug           string
	Ratio          string
	TemplateType   string
	Category       string
	Domain         string
	Description    string
	Active         bool
	Model          string
	Quality        string
	Format         string
	RefRequired    bool
	PromptTemplate string
	SkillSpecMD    string
	SampleImages   string // one URL per line
	Fields         []fieldRow

	defaultRefs []string          // default_reference_images of the first image config, kept
	others      []json.RawMessage // the other generation configs, kept
	hadSlug     bool              // the saved template has a slug (an empty one is then refused by the core)
}

// fieldRow is one row of the field editor.
type fieldRow struct {
	ID          string // unique prefix of the row's element ids
	Key         string
	Label       string
	Type        string
	Required    bool
	Placeholder string
	Help        string
	Options     string // one option per line: value|label
}

// editorView is the template editor page.
type editorView struct {
	Chrome    chrome
	Base      string
	Form      templateForm
	Error     string
	Samples   []string
	CanUpload bool
	// Preview of the saved template: its fields as inputs and the substituted prompt.
	PreviewFields []contract.Field
	PreviewInput  map[string]string
	Preview       string
	PreviewError  string
	Formats       []contract.ArticleFormat
	Qualities     []string
}

// newTemplatePage shows an empty editor (an image template with one field row).
func (c *Console) newTemplatePage(w http.ResponseWriter, r *http.Request, v *visit) error {
	f := templateForm{Type: models.TemplateImage, Active: true, Model: contract.ModelAuto, Format: "xiaohongshu",
		Fields: []fieldRow{{Required: true}}}
	if t := r.URL.Query().Get("type"); t == models.TemplateArticle {
		f.Type = t
	}
	c.renderEditor(w, r, v, http.StatusOK, c.editor(v, f))
	return nil
}

// editTemplatePage shows the editor of a template the identity owns.
func (c *Console) editTemplatePage(w http.ResponseWriter, r *http.Request, v *visit) error {
	t, err := c.findTemplate(r, v, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	p := c.editor(v, formOfTemplate(t))
	p.Chrome.Notice = notice(r, v)
	c.addPreview(&p, t)
	c.renderEditor(w, r, v, http.StatusOK, p)
	return nil
}

// saveTemplate creates (POST .../templates/new) or changes (POST .../templates/{id}) a template; the
// "add-field" operation only re-renders the form with one more field row.
func (c *Console) saveTemplate(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	f := formFromRequest(r)
	f.ID = id
	var current *models.TemplateView
	if id != "" {
		t, err := c.findTemplate(r, v, id)
		if err != nil {
			return err
		}
		current = t
		f.Type = t.Type
		kept := formOfTemplate(t)
		f.defaultRefs, f.others, f.hadSlug = kept.defaultRefs, kept.others, t.Slug != nil
	}
	if r.PostFormValue("op") == "add-field" {
		f.Fields = append(f.Fields, fieldRow{ID: rowID(len(f.Fields)), Required: true})
		p := c.editor(v, f)
		if current != nil {
			c.addPreview(&p, current)
		}
		c.renderEditor(w, r, v, http.StatusOK, p)
		return nil
	}
	configs, err := f.configs()
	var saved *models.TemplateView
	if err == nil {
		if id == "" {
			saved, err = c.svc.Templates().CreateTemplate(ctx, v.id, f.input(configs))
		} else {
			saved, err = c.svc.Templates().UpdateTemplate(ctx, v.id, f.patch(configs))
		}
	}
	if err != nil {
		status, msg := pageError(r, err)
		p := c.editor(v, f)
		p.Error = msg
		if current != nil {
			c.addPreview(&p, current)
		}
		c.renderEditor(w, r, v, status, p)
		return nil
	}
	seeOther(w, r, v.section+"/templates/"+saved.ID, "template-saved")
	return nil
}

// fieldRowFragment is the htmx fragment of one empty field row.
func (c *Console) fieldRowFragment(w http.ResponseWriter, r *http.Request, v *visit) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	c.render(w, r, http.StatusOK, fieldRowEditor(fieldRow{ID: "fx" + hex.EncodeToString(b[:]), Required: true}))
	return nil
}

// uploadSample stores an uploaded image through the upload core (as POST /api/upload-ref) and adds its
// URL to the template's sample images.
func (c *Console) uploadSample(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	t, err := c.findTemplate(r, v, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	file, _, err := r.FormFile("file")
	if err != nil {
		return models.Invalid("choose an image file to upload")
	}
	defer file.Close()
	up, err := c.svc.Uploads().UploadFile(ctx, c.opts.Media, v.id, "", file)
	if err != nil {
		return err
	}
	if up.MediaType != string(media.Image) {
		_ = c.svc.Uploads().RemoveUpload(ctx, c.opts.Media, v.id, up.ID)
		return models.Invalid("a sample image must be a png, jpg, webp or gif image")
	}
	images := []string{up.URL}
	if t.ImageColumns != nil {
		images = append(append([]string{}, t.SampleImages...), up.URL)
	}
	if _, err := c.svc.Templates().UpdateTemplate(ctx, v.id, models.TemplatePatch{ID: t.ID, SampleImages: &images}); err != nil {
		return err
	}
	seeOther(w, r, v.section+"/templates/"+t.ID, "sample-added")
	return nil
}

// previewTemplate substitutes the posted field values into the saved template's prompt
// (models.TemplatePromptPreview); htmx requests get only the result fragment.
func (c *Console) previewTemplate(w http.ResponseWriter, r *http.Request, v *visit) error {
	t, err := c.findTemplate(r, v, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	p := c.editor(v, formOfTemplate(t))
	c.addPreview(&p, t)
	input := map[string]any{}
	for _, f := range p.PreviewFields {
		if val := r.PostFormValue("in_" + f.Key); val != "" {
			input[f.Key] = val
			p.PreviewInput[f.Key] = val
		}
	}
	status := http.StatusOK
	if p.Preview, err = c.svc.Templates().TemplatePromptPreview(r.Context(), v.id, t.ID, input); err != nil {
		status, p.PreviewError = pageError(r, err)
	}
	if r.Header.Get("HX-Request") == "true" {
		c.render(w, r, http.StatusOK, previewResult(p.Preview, p.PreviewError))
		return nil
	}
	c.renderEditor(w, r, v, status, p)
	return nil
}

// findTemplate returns a template the identity may see (as listed by GET /api/templates), or KindNotFound.
func (c *Console) findTemplate(r *http.Request, v *visit, id string) (*models.TemplateView, error) {
	f := models.TemplateFilter{}
	if v.section == adminPrefix {
		f.Source = models.SourcePlatform
	}
	rows, err := c.svc.Templates().ListTemplates(r.Context(), v.id, f)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].ID == id {
			return &rows[i], nil
		}
	}
	return nil, models.NotFound("template")
}

// editor returns the editor page for a form.
func (c *Console) editor(v *visit, f templateForm) editorView {
	title := "New template"
	if f.ID != "" {
		title = "Edit template"
	}
	for i := range f.Fields {
		if f.Fields[i].ID == "" {
			f.Fields[i].ID = rowID(i)
		}
	}
	return editorView{Chrome: c.chrome(v, title, v.section+"/templates"), Base: v.section, Form: f,
		CanUpload: f.ID != "" && f.Type == models.TemplateImage && v.id.May(models.CapGenerate) && c.opts.Media != nil,
		Formats:   contract.ArticleFormats(), Qualities: contract.ImageQualities(), PreviewInput: map[string]string{}}
}

// addPreview fills the preview part of the editor from the saved template (form mode only).
func (c *Console) addPreview(p *editorView, t *models.TemplateView) {
	if t.ImageColumns != nil {
		p.Samples = t.SampleImages
	}
	f := formOfTemplate(t)
	if strings.TrimSpace(f.PromptTemplate) == "" {
		return
	}
	p.PreviewFields = fieldsOf(f.Fields)
}

// renderEditor renders the editor with a status.
func (c *Console) renderEditor(w http.ResponseWriter, r *http.Request, v *visit, status int, p editorView) {
	c.render(w, r, status, editorPage(p))
}

// rowID is the element id prefix of the i-th field row of a rendered form.
func rowID(i int) string { return "f" + strconv.Itoa(i) }

// formOfTemplate fills the editor from a template as its owner sees it.
func formOfTemplate(t *models.TemplateView) templateForm {
	f := templateForm{ID: t.ID, Type: t.Type, ZhName: t.ZhName, TemplateType: t.TemplateType, Category: t.Category,
		Description: t.Description, Active: t.Active}
	if t.Slug != nil {
		f.Slug = *t.Slug
	}
	if t.ImageColumns != nil {
		f.Ratio, f.Domain = t.Ratio, t.Domain
		f.SampleImages = strings.Join(t.SampleImages, "\n")
	}
	raw, _ := json.Marshal(t.GenerationConfigs)
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list)
	if len(list) == 0 {
		return f
	}
	f.others = list[1:]
	var fields []contract.Field
	if t.Type == models.TemplateArticle {
		var cfg contract.ArticleConfig
		_ = json.Unmarshal(list[0], &cfg)
		f.Format, f.PromptTemplate, f.SkillSpecMD, fields = cfg.Format, cfg.PromptTemplate, cfg.SkillSpecMD, cfg.Fields
	} else {
		var cfg contract.ImageConfig
		_ = json.Unmarshal(list[0], &cfg)
		f.Model, f.Quality, f.RefRequired, f.defaultRefs = cfg.Model, cfg.Quality, cfg.RefRequired, cfg.DefaultReferenceImages
		f.PromptTemplate, f.SkillSpecMD, fields = cfg.PromptTemplate, cfg.SkillSpecMD, cfg.Fields
	}
	for i, fd := range fields {
		row := fieldRow{ID: rowID(i), Key: fd.Key, Label: fd.Label, Type: fd.EffectiveType(), Required: fd.IsRequired(),
			Placeholder: fd.Placeholder, Help: fd.Help}
		var opts []string
		for _, o := range fd.Options {
			line := o.Value()
			if o.Label() != o.Value() {
				line += "|" + o.Label()
			}
			opts = append(opts, line)
		}
		row.Options = strings.Join(opts, "\n")
		f.Fields = append(f.Fields, row)
	}
	return f
}

// formFromRequest reads the editor's posted form.
func formFromRequest(r *http.Request) templateForm {
	pf := r.PostForm
	get := func(k string) string { return strings.TrimSpace(pf.Get(k)) }
	f := templateForm{Type: get("type"), ZhName: get("zh_name"), Slug: get("slug"), Ratio: get("ratio"),
		TemplateType: get("template_type"), Category: get("category"), Domain: get("domain"),
		Description: get("description"), Active: pf.Get("active") != "", Model: get("model"), Quality: get("quality"),
		Format: get("format"), RefRequired: pf.Get("ref_required") != "", PromptTemplate: pf.Get("prompt_template"),
		SkillSpecMD: pf.Get("skill_spec_md"), SampleImages: pf.Get("sample_images")}
	at := func(k string, i int) string {
		if vs := pf[k]; i < len(vs) {
			return vs[i]
		}
		return ""
	}
	for i := range pf["field_key"] {
		row := fieldRow{Key: strings.TrimSpace(at("field_key", i)), Label: strings.TrimSpace(at("field_label", i)),
			Type: at("field_type", i), Required: at("field_required", i) != "no",
			Placeholder: strings.TrimSpace(at("field_placeholder", i)), Help: strings.TrimSpace(at("field_help", i)),
			Options: at("field_options", i)}
		if row.Key == "" && row.Label == "" && strings.TrimSpace(row.Options) == "" {
			continue
		}
		row.ID = rowID(len(f.Fields))
		f.Fields = append(f.Fields, row)
	}
	return f
}

// fieldsOf turns editor rows into template fields: "text" and a required field are left to their
// defaults, and each non-empty options line becomes one option.
func fieldsOf(rows []fieldRow) []contract.Field {
	out := make([]contract.Field, 0, len(rows))
	for _, row := range rows {
		fd := contract.Field{Key: row.Key, Label: row.Label, Placeholder: row.Placeholder, Help: row.Help}
		if row.Type != "" && row.Type != contract.FieldText {
			fd.Type = row.Type
		}
		if !row.Required {
			no := false
			fd.Required = &no
		}
		for _, line := range strings.Split(row.Options, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				fd.Options = append(fd.Options, contract.OptionFromString(line))
			}
		}
		out = append(out, fd)
	}
	return out
}

// configs returns the generation_configs of the form: its first config, then the kept ones.
func (f *templateForm) configs() (json.RawMessage, error) {
	var first any
	fields := fieldsOf(f.Fields)
	if f.Type == models.TemplateArticle {
		first = contract.ArticleConfig{Format: f.Format, PromptTemplate: f.PromptTemplate, Fields: fields, SkillSpecMD: f.SkillSpecMD}
	} else {
		first = contract.ImageConfig{Model: f.Model, PromptTemplate: f.PromptTemplate, Fields: fields,
			SkillSpecMD: f.SkillSpecMD, RefRequired: f.RefRequired, DefaultReferenceImages: f.defaultRefs, Quality: f.Quality}
	}
	b, err := json.Marshal(first)
	if err != nil {
		return nil, models.Invalid("the generation config could not be encoded: %v", err)
	}
	list := append([]json.RawMessage{b}, f.others...)
	return json.Marshal(list)
}

// sampleList returns the sample image URLs of the form, one per non-empty line.
func (f *templateForm) sampleList() []string {
	out := []string{}
	for _, line := range strings.Split(f.SampleImages, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// input is the creation body of the form (as POST /api/templates).
func (f *templateForm) input(configs json.RawMessage) models.TemplateInput {
	active := f.Active
	in := models.TemplateInput{Type: f.Type, Slug: f.Slug, ZhName: f.ZhName, TemplateType: f.TemplateType,
		Category: f.Category, Description: f.Description, GenerationConfigs: configs, Active: &active}
	if f.Type != models.TemplateArticle {
		in.Ratio, in.Domain, in.SampleImages = f.Ratio, f.Domain, f.sampleList()
	}
	return in
}

// patch is the change body of the form (as PATCH /api/templates): every column of the editor.
func (f *templateForm) patch(configs json.RawMessage) models.TemplatePatch {
	p := models.TemplatePatch{ID: f.ID, ZhName: &f.ZhName, TemplateType: &f.TemplateType, Category: &f.Category,
		Description: &f.Description, GenerationConfigs: configs, Active: &f.Active}
	if f.Slug != "" || f.hadSlug {
		p.Slug = &f.Slug
	}
	if f.Type != models.TemplateArticle {
		images := f.sampleList()
		p.Ratio, p.Domain, p.SampleImages = &f.Ratio, &f.Domain, &images
	}
	return p
}

// kindName names a template kind for people.
func kindName(t string) string {
	switch t {
	case models.TemplateArticle:
		return "copy"
	case "video":
		return "video"
	}
	return "image"
}

// editorAction is where the editor posts: the new-template path or the template's own.
func editorAction(p editorView) string {
	if p.Form.ID == "" {
		return p.Base + "/templates/new"
	}
	return p.Base + "/templates/" + p.Form.ID
}

// itoa1 formats a zero-based index as a one-based number.
func itoa1(i int) string { return strconv.Itoa(i + 1) }

// currentIf is the aria-current value of a filter link.
func currentIf(current bool) string {
	if current {
		return "page"
	}
	return "false"
}

package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"studio/models/contract"
)

// Copy generation (POST /api/article, spec 4.6 and D8). A copy template's first generation config
// decides the format and the recipe: a form template substitutes the caller's field values into its
// prompt_template, a spec template sends its skill_spec_md with the caller's one-sentence description.
// A chat upstream is asked for a JSON object with the fields of the format; its answer is parsed
// leniently (code fences, prose around the object, a few key aliases), and an answer without a title
// and a body is an upstream failure, so that routing falls back to the next upstream.
//
// Copy costs no credits: section 8 prices images, image reading and video, and names chat as free, but
// lists no cost for copy, so copy is treated as free like the assistant chat. It is counted in usage as
// ServiceCopy, which the report shows in the chat column (D8).

// ArticleRequest is the body of POST /api/article.
type ArticleRequest struct {
	TemplateSlug string `json:"template_slug"`
	// Input is an object of field values (form template) or a one-sentence description (spec template).
	Input json.RawMessage `json:"input"`
}

// ArticlePrompt is a validated copy request: the format to return and the prompts for a chat upstream.
type ArticlePrompt struct {
	Format string
	System string
	User   string
}

// Article is the answer of POST /api/article: hashtags only for the xiaohongshu format.
type Article struct {
	Format   string    `json:"format"`
	Title    string    `json:"title"`
	Body     string    `json:"body"`
	Hashtags *[]string `json:"hashtags,omitempty"`
}

// copyWriter is the role every copy prompt starts from.
const copyWriter = "You are an experienced social-media and marketing copywriter. Write in the language of the user's request."

// PrepareArticle loads the copy template the caller may use and turns the input into prompts. An
// unknown or invisible template is 404; a missing required field, an input of the wrong shape or an
// empty description is 400.
func (cs *CopyService) PrepareArticle(ctx context.Context, id *Identity, req ArticleRequest) (*ArticlePrompt, error) {
	a := cs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	t, err := a.Templates().ArticleTemplateForUse(ctx, id, strings.TrimSpace(req.TemplateSlug))
	if err != nil {
		return nil, err
	}
	cfgs, err := t.ArticleConfigs()
	if err != nil {
		return nil, err
	}
	cfg := cfgs[0]
	format, ok := contract.ArticleFormatByName(cfg.Format)
	if !ok {
		return nil, Internal("article: template "+t.ID, fmt.Errorf("unknown format %q", cfg.Format))
	}
	p := &ArticlePrompt{Format: format.Format}
	input := bytes.TrimSpace(req.Input)
	if strings.TrimSpace(cfg.SkillSpecMD) != "" {
		var desc string
		if len(input) == 0 || input[0] != '"' || json.Unmarshal(input, &desc) != nil || strings.TrimSpace(desc) == "" {
			return nil, Invalid("input is required: this copy template takes a one-sentence description (a string)")
		}
		p.System = cfg.SkillSpecMD + "\n\n" + copyWriter + " " + formatInstruction(format)
		p.User = strings.TrimSpace(desc)
		return p, nil
	}
	if len(input) > 0 && input[0] != '{' && string(input) != "null" {
		return nil, Invalid("input must be an object of field values for this copy template (it is a form template)")
	}
	values := map[string]any{}
	if len(input) > 0 && string(input) != "null" {
		if err := DecodeJSON(input, &values); err != nil {
			return nil, Invalid("input must be an object of field values: %s", err.Error())
		}
	}
	prompt, err := formPrompt(cfg.PromptTemplate, cfg.Fields, values)
	if err != nil {
		return nil, err
	}
	p.System = copyWriter + " " + formatInstruction(format)
	p.User = prompt
	return p, nil
}

// formatInstruction tells a chat upstream which JSON object to answer with for a format.
func formatInstruction(f contract.ArticleFormat) string {
	kind := map[string]string{
		contract.FormatXiaohongshu: "a xiaohongshu (RED) note",
		contract.FormatWechat:      "a WeChat official-account article",
		contract.FormatDetail:      "a product detail page text",
		contract.FormatScript:      "a short video script",
	}[f.Format]
	keys := `"title" (string) and "body" (string)`
	if hasHashtags(f.Format) {
		keys = `"title" (string), "body" (string) and "hashtags" (an array of 3 to 8 short topic strings without "#")`
	}
	return fmt.Sprintf("Write %s. Answer with one JSON object only, with exactly the keys %s, and no other text.", kind, keys)
}

// hasHashtags reports whether a format returns hashtags (spec 4.6: only xiaohongshu).
func hasHashtags(format string) bool {
	f, ok := contract.ArticleFormatByName(format)
	if !ok {
		return false
	}
	for _, field := range f.ReturnedFields {
		if field == "hashtags" {
			return true
		}
	}
	return false
}

// ParseArticle reads a chat upstream's answer as the copy of a format. The answer may wrap the JSON
// object in prose or a code fence; body may be a list of paragraphs and hashtags a single string. An
// answer without a JSON object, a title or a body is an error.
func ParseArticle(format, answer string) (*Article, error) {
	obj, err := answerObject(answer)
	if err != nil {
		return nil, err
	}
	art := &Article{Format: format, Title: textField(obj, "title", "headline"), Body: textField(obj, "body", "content", "text")}
	if art.Title == "" || art.Body == "" {
		return nil, errors.New("article: the answer has no title or no body")
	}
	if hasHashtags(format) {
		tags := hashtags(obj)
		art.Hashtags = &tags
	}
	return art, nil
}

// answerObject finds the JSON object in a model's answer: the first '{' from which one object decodes
// (what follows it is ignored). Keys are lower-cased.
func answerObject(answer string) (map[string]json.RawMessage, error) {
	s := answer
	for tries := 0; tries < 8; tries++ {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			break
		}
		var obj map[string]json.RawMessage
		if err := json.NewDecoder(strings.NewReader(s[i:])).Decode(&obj); err == nil {
			out := make(map[string]json.RawMessage, len(obj))
			for k, v := range obj {
				out[strings.ToLower(strings.TrimSpace(k))] = v
			}
			return out, nil
		}
		s = s[i+1:]
	}
	return nil, errors.New("the answer holds no JSON object")
}

// textField returns the first of keys that holds a non-blank string, or a list of strings joined
// as paragraphs.
func textField(obj map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
		var parts []string
		if json.Unmarshal(raw, &parts) == nil {
			if joined := strings.TrimSpace(strings.Join(parts, "\n\n")); joined != "" {
				return joined
			}
		}
	}
	return ""
}

// hashtags returns the distinct hashtags of an answer without their '#', from an array of strings or
// one string of tags; none is an empty list.
func hashtags(obj map[string]json.RawMessage) []string {
	var list []string
	for _, k := range []string{"hashtags", "tags"} {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			list = strings.FieldsFunc(s, func(r rune) bool { return r == '#' || r == ',' || r == '，' || unicode.IsSpace(r) })
		} else {
			_ = json.Unmarshal(raw, &list)
		}
		break
	}
	out := make([]string, 0, len(list))
	seen := map[string]bool{}
	for _, t := range list {
		t = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(t), "#＃"))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

// WriteArticle answers POST /api/article (spec 4.6, D8): the template's recipe becomes prompts, a chat
// upstream chosen by routing writes the copy as a JSON object, and an answer ParseArticle cannot read
// counts as that upstream's failure, so the next upstream of the chain is tried. Copy is free of credits
// and counted in usage as copy.
func (cs *CopyService) WriteArticle(ctx context.Context, id *Identity, req ArticleRequest) (*Article, error) {
	p, err := cs.PrepareArticle(ctx, id, req)
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	var art *Article
	msgs := []ChatMessage{{Role: "system", Content: p.System}, {Role: "user", Content: p.User}}
	err = r.Chat(ctx, "copy generation", msgs, true, func(answer string) error {
		a, err := ParseArticle(p.Format, answer)
		art = a
		return err
	})
	if err != nil {
		return nil, err
	}
	cs.a.Credits().RecordUsage(id.TenantID, ServiceCopy, id.Agent)
	return art, nil
}

// CopyService holds the generations answered at once: copy (articles), image readings and chat.
type CopyService struct{ a *App }

// Copy returns copy, image readings and chat.
func (a *App) Copy() *CopyService { return a.svc.copy }

package upstream

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hasCJK reports whether s contains Chinese, Japanese or Korean characters.
func hasCJK(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}

// topicOf returns the first phrase of s, at most n runes, without trailing punctuation.
func topicOf(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n。！？!?；;"); i > 0 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n])
	}
	s = strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
	if s == "" {
		s = "creative idea"
	}
	return s
}

// copyText is the builtin answer to a copy request.
type copyText struct {
	Title    string   `json:"title"`
	Body     string   `json:"body"`
	Hashtags []string `json:"hashtags"`
}

// composeCopy writes deterministic copy about the user's request: a headline built around its subject
// (never the request cut short), a body and hashtags.
func composeCopy(system, user string) copyText {
	seed := rng(seedOf([]byte(system), []byte(user)))
	topic := subjectOf(user)
	if hasCJK(user + system) {
		headlines := []string{"%s｜一篇讲清楚它的亮点", "关于%s，这些细节值得一看", "%s真实体验分享", "%s，收藏这一篇就够了"}
		openers := []string{"今天想和你聊聊", "最近一直在琢磨", "想和你分享", "终于整理好了"}
		tags := copyTags(&seed, strings.ReplaceAll(topic, " ", ""), []string{"好物分享", "种草", "生活方式", "日常分享", "灵感"})
		middles := []string{"细节决定质感，配色和构图都经过反复推敲。", "从灵感到成品，每一步都值得慢慢体会。", "简单的元素组合在一起，也能很有氛围感。"}
		endings := []string{"喜欢的话记得收藏，我们下次见！", "你更喜欢哪一种？评论区告诉我。", "欢迎转发给需要的朋友。"}
		title := fmt.Sprintf(headlines[seed.next()%uint64(len(headlines))], topic)
		body := fmt.Sprintf("%s「%s」。%s%s", openers[seed.next()%uint64(len(openers))], topic,
			middles[seed.next()%uint64(len(middles))], endings[seed.next()%uint64(len(endings))])
		return copyText{Title: title, Body: body, Hashtags: tags}
	}
	tags := copyTags(&seed, strings.ToLower(strings.ReplaceAll(topic, " ", "")), []string{"inspiration", "design", "dailypick", "recommended", "lifestyle"})
	headlines := []string{"%s: What Makes It Special", "Why %s Deserves a Closer Look", "%s, Explained", "Meet %s"}
	openers := []string{"Here is a fresh take on", "Let's talk about", "A closer look at", "Everything you need to know about"}
	middles := []string{"Every detail was chosen with care, from colour to composition.", "Simple elements, combined well, create a strong mood.", "From the first idea to the final piece, each step matters."}
	endings := []string{"Save it for later and share it with a friend.", "Tell us which version you like best.", "More ideas are coming soon."}
	title := fmt.Sprintf(headlines[seed.next()%uint64(len(headlines))], titleCase(topic))
	body := fmt.Sprintf("%s %s. %s %s", openers[seed.next()%uint64(len(openers))], topic,
		middles[seed.next()%uint64(len(middles))], endings[seed.next()%uint64(len(endings))])
	return copyText{Title: title, Body: body, Hashtags: tags}
}

// copyTags returns the hashtags of builtin copy: the subject, then two tags of the pool chosen by seed
// (never pieces of the request's own words).
func copyTags(seed *rng, subject string, pool []string) []string {
	tags := []string{}
	if subject != "" && subject != topicOf("", 1) {
		tags = append(tags, subject)
	}
	start := int(seed.next() % uint64(len(pool)))
	for i := 0; len(tags) < 3 && i < len(pool); i++ {
		tags = append(tags, pool[(start+i)%len(pool)])
	}
	return tags
}

// cjkInstruction matches the request words around a Chinese subject ("为我们的…写一篇小红书笔记").
var cjkInstruction = regexp.MustCompile(`^(请|帮我|帮忙|麻烦)?(为|给|替)?(我们|我|你们|大家)?的?|(写|生成|创作|撰写|做)(一|1)?(篇|段|条|个|份|则)?(关于)?|(小红书|公众号|朋友圈)?(笔记|文章|推文|文案|详情页|详情|脚本|短视频脚本|介绍)$`)

// enInstruction matches an English request before its subject ("Write a short post about ...").
var enInstruction = regexp.MustCompile(`(?i)^(please\s+)?(write|create|generate|draft|compose|make|give me)\b.*?\b(about|on|for|introducing|presenting|of)\s+`)

// enClause ends an English subject at a relative clause or an addition ("a bottle that keeps ...").
var enClause = regexp.MustCompile(`(?i)\s(that|which|who|with|and|to|for|so|because|in|at|using)\s`)

// subjectOf returns what a request is about, for a headline: its first clause without the request's own
// words, at most 12 Chinese characters or 6 English words, cut between words.
func subjectOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n。！？!?；;，,：:"); i > 0 {
		s = s[:i]
	}
	if hasCJK(s) {
		for i := 0; i < 3; i++ {
			s = strings.TrimSpace(cjkInstruction.ReplaceAllString(s, ""))
		}
		s = strings.TrimSuffix(s, "的")
		if r := []rune(s); len(r) > 12 {
			s = string(r[:12])
		}
	} else {
		s = enInstruction.ReplaceAllString(s, "")
		if loc := enClause.FindStringIndex(s); loc != nil && loc[0] > 0 {
			s = s[:loc[0]]
		}
		words := strings.Fields(s)
		for len(words) > 0 && slices.Contains([]string{"our", "my", "the", "a", "an", "your", "their"}, strings.ToLower(words[0])) {
			words = words[1:]
		}
		if len(words) > 6 {
			words = words[:6]
		}
		s = strings.Join(words, " ")
	}
	s = strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
	if s == "" {
		return topicOf("", 1)
	}
	return s
}

// titleCase capitalises the first letter of each word.
func titleCase(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		first, size := utf8.DecodeRuneInString(w)
		words[i] = string(unicode.ToUpper(first)) + w[size:]
	}
	return strings.Join(words, " ")
}

// chatAnswer returns the builtin answer to messages: a JSON copy object when the prompts ask for
// JSON, plain text otherwise.
func chatAnswer(messages []Message) string {
	var system, user string
	for _, m := range messages {
		switch m.Role {
		case "system", "developer":
			system += m.Content + "\n"
		case "user":
			user = m.Content
		}
	}
	c := composeCopy(system, user)
	if strings.Contains(strings.ToLower(system+user), "json") {
		data, _ := json.Marshal(c)
		return string(data)
	}
	return c.Body
}

// description is the JSON of the builtin image reader (fields of spec section 4.7).
type description struct {
	Sculpt      map[string]string `json:"sculpt"`
	Prompt      string            `json:"prompt"`
	PromptCN    string            `json:"prompt_cn"`
	StyleTags   []string          `json:"style_tags"`
	AspectRatio string            `json:"aspect_ratio"`
	ZhName      string            `json:"zh_name"`
	Description string            `json:"description"`
	Genre       string            `json:"genre"`
	Ratio       string            `json:"ratio"`
	BodyMD      string            `json:"body_md"`
}

// describe writes the builtin reading of a measured picture.
func describe(a *analysis) description {
	var names, zh []string
	for _, c := range a.Colours {
		names = append(names, c.name)
		zh = append(zh, c.zh)
	}
	light, lightZh := "soft even light", "柔和均匀的光线"
	switch {
	case a.Brightness > 0.7:
		light, lightZh = "bright high-key light", "明亮的高调光线"
	case a.Brightness < 0.3:
		light, lightZh = "dark low-key light", "低调暗部光线"
	}
	orientation, orientZh := "square", "方形"
	if a.Width > a.Height {
		orientation, orientZh = "landscape", "横幅"
	} else if a.Height > a.Width {
		orientation, orientZh = "portrait", "竖幅"
	}
	subject := "an abstract arrangement of " + strings.Join(names, ", ") + " shapes"
	if a.Transparent {
		subject = "a cut-out subject on a transparent background"
	}
	palette := strings.Join(names, ", ")
	prompt := fmt.Sprintf("%s, %s composition, %s palette, %s, clean graphic style, aspect ratio %s",
		subject, orientation, palette, light, a.Ratio)
	promptCN := fmt.Sprintf("%s构图，主色为%s，%s，简洁的平面设计风格，画幅比例%s", orientZh, strings.Join(zh, "、"), lightZh, a.Ratio)
	genre := "graphic"
	if len(a.Colours) > 0 && (a.Colours[0].name == "black" || a.Colours[0].name == "gray") {
		genre = "minimal"
	}
	d := description{
		Sculpt: map[string]string{
			"subject":     subject,
			"composition": fmt.Sprintf("%s frame, %dx%d pixels", orientation, a.Width, a.Height),
			"universe":    "flat graphic design",
			"light":       light,
			"print":       "digital print, colours " + strings.Join(a.Hex, " "),
			"texture":     "smooth gradients",
		},
		Prompt:      prompt,
		PromptCN:    promptCN,
		StyleTags:   append([]string{genre, orientation}, names...),
		AspectRatio: a.Ratio,
		ZhName:      zh[0] + orientZh + "设计",
		Description: fmt.Sprintf("A %s picture of %dx%d pixels dominated by %s.", orientation, a.Width, a.Height, palette),
		Genre:       genre,
		Ratio:       a.Ratio,
	}
	d.BodyMD = fmt.Sprintf("## %s\n\n- size: %dx%d\n- ratio: %s\n- palette: %s\n- light: %s\n\n%s\n",
		d.ZhName, a.Width, a.Height, a.Ratio, strings.Join(a.Hex, ", "), light, prompt)
	return d
}

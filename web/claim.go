package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"studio/models"
)

// Claim landing pages: {claim_site_url}/claim/<code>. A buyer sees what the code gives (models
// PreviewClaim), redeems it with a nickname and an e-mail (models RedeemClaim, the core of POST
// /api/promo-claims), and gets how to sign in, a form to set the account's first password (models
// SetFirstPassword, authorised by the redemption's login token), and the tutorial PDF as the last step.
// The login token itself and the API hint for integrators stay in collapsed sections.
// The pages are public and written in Chinese, for the buyers the codes are sold to (lang="zh-CN").
//
// These pages have no session: their forms (redeem, first password) are guarded like every form
// (formGuard, web/forms.go: the token is bound to the pre-session cookie). The per-address limits of
// previews and redemptions are the core's, counted in the database: the same for these pages, POST
// /api/promo-claims and every replica. A redemption signs in nobody to an account that existed before
// it (D8): only the page of the redemption that created the account offers the password form.

// claimView is what a claim page shows.
type claimView struct {
	Chrome    chrome
	Code      string
	State     string // active | used | disabled | unknown | redeemed | password | password-set
	Preview   *models.ClaimPreview
	FormToken string
	Nickname  string
	Email     string
	Error     string
	Redeemed  *models.ClaimRedeemed
	LoginURL  string
	// LoginToken is the redemption's login token, carried by the password form (State "password").
	LoginToken string
	// SignIn and Buyer are the languages this browser gets on the sign-in page and on the buyer's own
	// pages (console, device approval): the steps quote the labels those pages show.
	SignIn, Buyer lang
}

// claimPage shows the benefit list and the redeem form of a code, or why it cannot be redeemed.
func (c *Console) claimPage(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	code := mux.Vars(r)["code"]
	p := c.claimView(w, r, code)
	status := c.loadClaim(r, &p)
	c.render(w, r, status, claimPage(p))
}

// claimRedeem redeems a code for the posted nickname and e-mail.
func (c *Console) claimRedeem(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	code := mux.Vars(r)["code"]
	p := c.claimView(w, r, code)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		p.State, p.Error = "unknown", "无法读取表单，请刷新页面后重试。"
		c.render(w, r, http.StatusBadRequest, claimPage(p))
		return
	}
	p.Nickname, p.Email = strings.TrimSpace(r.PostFormValue("nickname")), strings.TrimSpace(r.PostFormValue("email"))
	if c.forms.check(r, nil) != nil {
		status := c.loadClaim(r, &p)
		if status == http.StatusOK {
			status = http.StatusForbidden
		}
		p.Error = claimExpiredText
		c.render(w, r, status, claimPage(p))
		return
	}
	out, err := c.svc.Claims().RedeemClaim(r.Context(), models.RedeemInput{Code: code, Nickname: p.Nickname, Email: p.Email}, clientAddress(r))
	if err != nil {
		status := c.loadClaim(r, &p)
		if status != http.StatusOK && status != http.StatusGone {
			c.render(w, r, status, claimPage(p))
			return
		}
		status, p.Error = c.claimError(r, err, p.State)
		c.render(w, r, status, claimPage(p))
		return
	}
	p.State, p.Redeemed = "redeemed", out
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, r, http.StatusOK, claimPage(p))
}

// claimPassword sets the first password of the buyer's account with the redemption's login token
// (models SetFirstPassword); a refusal shows the password form again with the reason.
func (c *Console) claimPassword(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	w.Header().Set("Cache-Control", "no-store")
	p := c.claimView(w, r, mux.Vars(r)["code"])
	p.State = "password"
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		p.Error = "无法读取表单，请刷新页面后重试。"
		c.render(w, r, http.StatusBadRequest, claimPage(p))
		return
	}
	p.LoginToken = strings.TrimSpace(r.PostFormValue("login_token"))
	if c.forms.check(r, nil) != nil {
		p.Error = claimExpiredText
		c.render(w, r, http.StatusForbidden, claimPage(p))
		return
	}
	password := r.PostFormValue("password")
	if password != r.PostFormValue("password_confirm") {
		p.Error = "两次输入的密码不一致，请重新输入。"
		c.render(w, r, http.StatusBadRequest, claimPage(p))
		return
	}
	u, err := c.svc.Auth().SetFirstPassword(r.Context(), p.LoginToken, password)
	if err != nil {
		status, msg := c.claimPasswordError(r, err)
		p.Error = msg
		if models.KindOf(err) == models.KindConflict || models.KindOf(err) == models.KindUnauthenticated {
			p.LoginToken = "" // nothing left to do with this form
		}
		c.render(w, r, status, claimPage(p))
		return
	}
	p.State, p.Email = "password-set", u.Email
	c.render(w, r, http.StatusOK, claimPage(p))
}

// claimPasswordError turns a refused password into the page's status and a Chinese sentence.
func (c *Console) claimPasswordError(r *http.Request, err error) (int, string) {
	status, _ := pageError(r, err)
	switch models.KindOf(err) {
	case models.KindInvalid:
		return status, fmt.Sprintf("密码需要至少 %d 个字符，最长 %d 个字节（约 %d 个汉字），请重新输入。", models.MinPasswordLength, models.MaxPasswordBytes, models.MaxPasswordBytes/3)
	case models.KindUnauthenticated:
		return status, "这个设置密码的链接已失效（已过期，或密码已经设置过）。请在登录页选择“邮件验证码”，用发到领取邮箱的验证码设置密码。"
	case models.KindConflict:
		return status, "该账号已经设置过密码，请直接用邮箱和密码登录（忘记密码时可在登录页用邮件验证码重设）。"
	case models.KindForbidden:
		return status, "该邮箱对应的账号已停用，请联系客服。"
	}
	return status, "设置密码失败，请稍后再试。"
}

// claimView returns an empty claim page for a code, with the token of its forms (formGuard).
func (c *Console) claimView(w http.ResponseWriter, r *http.Request, code string) claimView {
	ch := c.chrome(nil, "领取权益", "")
	ch.Lang, ch.L, ch.Home = string(langZH), langZH, "/claim/"+code
	return claimView{Chrome: ch, Code: code, FormToken: c.forms.token(w, r, nil),
		SignIn: pageLang(r, false), Buyer: pageLang(r, true),
		LoginURL: strings.TrimRight(c.svc.Config.BaseURL, "/") + "/login"}
}

// loadClaim fills the page from the code's preview and returns the page's status: 200 for an active or
// used code (a buyer may redeem again with the same e-mail to see the sign-in details), 410 for a
// disabled one, 404 for an unknown one.
func (c *Console) loadClaim(r *http.Request, p *claimView) int {
	prev, err := c.svc.Claims().PreviewClaim(r.Context(), p.Code, clientAddress(r))
	switch models.KindOf(err) {
	case models.KindNotFound, models.KindInvalid:
		p.State = "unknown"
		return http.StatusNotFound
	}
	if err != nil {
		status, _ := pageError(r, err)
		p.State, p.Error = "unknown", "服务暂时不可用，请稍后再试。"
		return status
	}
	p.Preview, p.State = prev, string(prev.Status)
	if prev.Status == models.ClaimDisabled {
		return http.StatusGone
	}
	return http.StatusOK
}

// claimError turns a refused redemption into the page's status and a Chinese sentence.
func (c *Console) claimError(r *http.Request, err error, state string) (int, string) {
	status, msg := pageError(r, err)
	switch models.KindOf(err) {
	case models.KindInvalid:
		return status, "请检查填写的内容：" + msg
	case models.KindConflict:
		if state == string(models.ClaimDisabled) {
			return status, "该领取码已停用，无法再领取。"
		}
		return status, "该领取码已被其他邮箱领取。如果是您本人领取的，请填写领取时使用的邮箱。"
	case models.KindForbidden:
		return status, "该邮箱对应的账号已停用，请联系客服。"
	case models.KindRateLimited:
		return status, "尝试次数过多，请稍后再试。"
	}
	return status, "领取失败，请稍后再试。"
}

// label quotes a label of another page as that page shows it in l: “登录” in Chinese, and in English
// the English label followed by its meaning, “Sign in”（登录）.
func label(l lang, en string) string {
	if l == langZH {
		return "“" + langZH.T(en) + "”"
	}
	return "“" + en + "”（" + langZH.T(en) + "）"
}

package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The buyer's pages (personal accounts: the dashboard with the balance and claimed templates, the
// templates list, the jobs page that generates from them, device approval, sign-in and sign-in by code)
// speak the browser's language: Accept-Language decides between English and Chinese, and a buyer whose
// browser names neither gets Chinese, the language of the claim pages. Tenant and administrator pages
// stay English. Every translated sentence is in the one catalogue below, keyed by its English text;
// TestCatalogueCoversEveryTranslatedText checks that each text the pages translate has its entry.

// lang is the language of a page.
type lang string

const (
	langEN lang = "en"
	langZH lang = "zh-CN"
)

// T returns the text in the page's language (the English key itself for English pages).
func (l lang) T(en string) string {
	if l == langZH {
		if zh, ok := catalogue[en]; ok {
			return zh
		}
	}
	return en
}

// Tf formats a translated text: its verbs (%s, %d) are the same in both languages.
func (l lang) Tf(en string, args ...any) string { return fmt.Sprintf(l.T(en), args...) }

// T translates a text into the language of the page.
func (ch chrome) T(en string) string { return ch.L.T(en) }

// pageLang picks the language of a page from Accept-Language: the supported language (zh* or en*)
// with the highest weight, the first listed on a tie; when the header names neither, Chinese for a
// buyer's page (buyer) and English otherwise.
func pageLang(r *http.Request, buyer bool) lang {
	best, bestQ := lang(""), 0.0
	for _, part := range strings.Split(r.Header.Get("Accept-Language"), ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		tag = strings.ToLower(strings.TrimSpace(tag))
		var l lang
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-"):
			l = langZH
		case tag == "en" || strings.HasPrefix(tag, "en-"):
			l = langEN
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = l, q
		}
	}
	switch {
	case best != "":
		return best
	case buyer:
		return langZH
	}
	return langEN
}

// catalogue holds the Chinese text of every English text the buyer's pages translate.
var catalogue = map[string]string{
	// Layout, navigation, errors.
	"Skip to content":                     "跳到正文",
	"Main":                                "主导航",
	"Signed in as":                        "已登录：",
	"Sign out":                            "退出登录",
	"studio creative generation gateway":  "studio 创意生成服务",
	"Dashboard":                           "我的积分",
	"Jobs":                                "生成",
	"Templates":                           "模板",
	"Error":                               "出错了",
	"Sign in with another key or account": "用其他账号或凭证登录",
	"Back to the start page":              "返回首页",
	"The request could not be used":       "请求无法处理",
	"Sign in first":                       "请先登录",
	"Not allowed":                         "无权访问",
	"Not found":                           "未找到",
	"Conflict":                            "操作冲突",
	"Too large":                           "文件或内容过大",
	"Too many requests":                   "请求过于频繁",
	"Not enough credits":                  "积分不足",
	"Something went wrong":                "出现错误",
	"Job submitted: its progress updates below.":                                                                "已提交：进度会在下方更新。",
	"Video submitted: its progress shows in the videos list below.":                                             "视频已提交：进度显示在下方的视频列表中。",
	"Something went wrong on our side. Try again in a moment.":                                                  "服务出现问题，请稍后再试。",
	"These are the credits this member account may spend (its dedicated credits, or the tenant's shared pool).": "这是该成员账号可以使用的积分（专属积分或团队共享积分）。",

	// Dashboard.
	"Your credits":              "积分余额",
	"Your claimed templates":    "已领取的模板",
	"No claimed templates yet.": "还没有领取的模板。",
	"Redeemed codes":            "已使用的领取码",
	"%d credits from %s":        "%d 积分，来自 %s",

	// Templates list.
	"All":                     "全部",
	"Image":                   "图片",
	"Copy":                    "文案",
	"video":                   "视频",
	"image":                   "图片",
	"copy":                    "文案",
	"New image template":      "新建图片模板",
	"New copy template":       "新建文案模板",
	"No templates yet.":       "还没有模板。",
	"Templates, newest first": "模板，最新的在前",
	"Sample":                  "示例图",
	"Name":                    "名称",
	"Kind":                    "类型",
	"Slug":                    "标识",
	"Source":                  "来源",
	"State":                   "状态",
	"inactive":                "未启用",
	"locked":                  "已锁定",
	"gated":                   "需领取",
	"mine":                    "我的",
	"platform":                "平台",
	"claimed":                 "已领取",

	// Jobs page.
	"What to generate":      "生成什么",
	"Image from a prompt":   "用描述生成图片",
	"Image from a template": "用模板生成图片",
	"Video":                 "视频",
	"Generate an image":     "生成图片",
	"Prompt":                "描述",
	"Aspect ratio":          "画面比例",
	"One standard image costs 1 credit, charged at submission and refunded in full if the job fails.": "一张标准图片消耗 1 积分，提交时扣除，生成失败时全额退还。",
	"Submit":    "提交",
	"Your jobs": "我的图片任务",
	"Refresh":   "刷新",
	"Pending":   "进行中",
	"Done":      "已完成",
	"Failed":    "失败",
	"The list shows the state when the page was loaded; use Refresh to update it.": "列表显示的是打开页面时的状态，点击“刷新”查看最新状态。",
	"Live: the list updates as jobs progress.":                                     "实时：列表随任务进度自动更新。",
	"Live updates paused; reconnecting. Use Refresh to reload the list.":           "实时更新已暂停，正在重新连接。可点击“刷新”重新加载列表。",
	"Jobs, newest first":                "任务，最新的在前",
	"Created":                           "创建时间",
	"Job":                               "任务",
	"Status":                            "状态",
	"Progress":                          "进度",
	"Result":                            "结果",
	"No jobs yet.":                      "还没有任务。",
	"Older jobs":                        "更早的任务",
	"Write copy from a template":        "用模板写文案",
	"Generate an image from a template": "用模板生成图片",
	"Copy is written at once and shown on this page.": "文案会立即生成并显示在本页。",
	"Write copy": "生成文案",
	"Generate":   "生成",
	"There is no template you can use yet. Templates of your tenant, platform templates and the templates of redeemed claim codes show here.": "还没有可用的模板。团队模板、平台模板和领取码解锁的模板会显示在这里。",
	"Template":                               "模板",
	"None: write a prompt":                   "不用模板：自己写描述",
	"Use this template":                      "使用这个模板",
	"Describe what you want in one sentence": "用一句话描述您想要的内容",
	"Generate a video":                       "生成视频",
	"Model tier":                             "模型档位",
	"The template's or the cheapest tier that fits": "模板指定的档位，或最便宜的合适档位",
	"%s: %d to %d s, %s":                            "%s：%d 到 %d 秒，%s",
	" or ":                                          " 或 ",
	"Duration in seconds":                           "时长（秒）",
	"Empty: the template's length. It must fit the tier (see the tier choice). Credits are charged per second at submission and refunded in full if the video fails.": "留空则使用模板的时长。时长须在所选档位的范围内。积分按秒计算，提交时扣除，生成失败时全额退还。",
	"It must fit the tier (see the tier choice). Credits are charged per second at submission and refunded in full if the video fails.":                               "时长须在所选档位的范围内。积分按秒计算，提交时扣除，生成失败时全额退还。",
	"Submit the video":          "提交视频",
	"Your copy":                 "生成的文案",
	"Your videos":               "我的视频",
	"Video tasks, newest first": "视频任务，最新的在前",
	"Open the video":            "打开视频",
	"Result of job %s":          "任务 %s 的结果",
	"(optional)":                "（选填）",
	"Choose…":                   "请选择…",

	// Device approval.
	"Sign in a device": "授权设备登录",
	"Device approved. You can close this page and return to your terminal.":                                        "已授权设备登录。可以关闭本页，回到终端继续操作。",
	"Request denied. The device was not signed in.":                                                                "已拒绝，该设备没有登录。",
	"A device asks to sign in to your studio account. Check that the code below matches the one in your terminal.": "有设备请求登录您的 studio 账号。请核对下面的验证码与终端中显示的是否一致。",
	"Code":                                  "验证码",
	"Eight letters, for example BCDF-GHJK.": "8 个字母，例如 BCDF-GHJK。",
	"E-mail":                                "邮箱",
	"Password":                              "密码",
	"Approve":                               "同意",
	"Deny":                                  "拒绝",
	"Approve with your e-mail and password above, or":                                 "可以在上方填写邮箱和密码后同意，或",
	"sign in on the sign-in page":                                                     "在登录页登录",
	"(for example with the login token of a redeemed claim code) and come back here.": "（例如用领取码的临时登录凭证）后回到这里。",
	"No password yet, or forgot it? Get a code by e-mail":                             "还没有密码或忘记密码？用邮件验证码登录",
	": it sets a password and brings you back here.":                                  "：设置密码后会回到这里。",
	"Sign in with your third-party account instead":                                   "改用第三方账号登录",
	"This form has expired. Reload the page and try again.":                           "页面已过期，请刷新后重试。",
	"The form could not be read. Reload the page and try again.":                      "无法读取表单，请刷新页面后重试。",
	"Unknown code: check the code shown in your terminal.":                            "验证码无效：请核对终端中显示的验证码。",
	"Too many attempts. Wait a while and try again.":                                  "尝试次数过多，请稍后再试。",

	// Sign-in pages.
	"Sign in":                "登录",
	"With a key":             "使用密钥或凭证",
	"API key or login token": "API 密钥或临时登录凭证",
	"A tenant key opens the tenant console, the administrator key the platform console. A member key shows its own jobs and balance. A login token is what a redeemed claim code gives you.": "团队密钥进入团队控制台，管理员密钥进入平台控制台；成员密钥查看自己的任务和积分；临时登录凭证由领取码领取后获得。",
	"Sign in with the key":     "用密钥登录",
	"With e-mail and password": "邮箱和密码",
	"Sessions last 12 hours from sign-in. Signing out ends the session on the server at once.": "登录后 12 小时内有效；退出登录会立即结束会话。",
	"Sign in with an e-mailed code": "用邮件验证码登录",
	"For an account without a password (for example one opened by redeeming a claim code) or one whose password is forgotten.": "适用于还没有密码的账号（例如领取码开通的账号）或忘记了密码的账号：用邮件验证码设置新密码并登录。",
	"1. Your e-mail":                 "1. 您的邮箱",
	"E-mail me a code":               "发送验证码到邮箱",
	"2. The code and a new password": "2. 验证码和新密码",
	"Code sent to":                   "验证码已发送到",
	"Six-digit code":                 "6 位验证码",
	"New password":                   "新密码",
	"At least %d characters.":        "至少 %d 个字符。",
	"New password again":             "再输入一次新密码",
	"Set the password and sign in":   "设置密码并登录",
	"Send another code":              "重新发送验证码",
	"Back to sign-in":                "返回登录页",
}

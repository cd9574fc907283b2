// Package fake is a strict Gemini API server on 127.0.0.1 for tests (the pages followed are those of
// package gemini). Like Google it answers an unknown key 400 INVALID_ARGUMENT with ErrorInfo reason
// API_KEY_INVALID, a missing key 403 PERMISSION_DENIED, RevokedKey 403 PERMISSION_DENIED (reported as
// leaked), UnpaidKey 400 FAILED_PRECONDITION (billing); unknown or missing fields 400 INVALID_ARGUMENT.
// Veo operations stay done: false while they are queued or running and end done with a sample or an
// error as they are polled. Prompts carry scenarios: "[refuse]" is blocked (promptFeedback.blockReason for
// an image, a finished operation filtered by raiMediaFilteredReasons for a video), "[refuse-output]" ends
// with finishReason IMAGE_SAFETY or a filtered video, "[fail]" with NO_IMAGE or an operation error,
// "[slow]" runs for ever. Fail scripts 429 (with RetryInfo or Retry-After) or 5xx answers.
package fake

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	Key        = "AIza-gemini-test-key"
	RevokedKey = "AIza-gemini-leaked-key"
	UnpaidKey  = "AIza-gemini-unbilled-key"
)

// Server is the fake.
type Server struct {
	*faketask.Host
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "/v1beta")
	return s
}

// Status writes a google.rpc.Status error.
func Status(w http.ResponseWriter, code int, status, msg string, details ...map[string]any) {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	faketask.WriteJSON(w, code, map[string]any{"error": e})
}

// RateLimitBody is a 429 as Google sends it, with a RetryInfo of 1 s.
const RateLimitBody = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_model","quotaId":"GenerateRequestsPerMinutePerProjectPerModel"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}`

// ServerErrorBody is a 503 as Google sends it.
const ServerErrorBody = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := s.Record(r)
	if r.URL.Query().Get("key") != "" {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the key goes in the x-goog-api-key header in these tests")
		return
	}
	switch key := r.Header.Get("X-Goog-Api-Key"); key {
	case Key:
	case "":
		Status(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	case RevokedKey:
		Status(w, http.StatusForbidden, "PERMISSION_DENIED", "Your API key was reported as leaked. Please use another API key.")
		return
	case UnpaidKey:
		Status(w, http.StatusBadRequest, "FAILED_PRECONDITION", "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.")
		return
	default:
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com",
				"metadata": map[string]any{"service": "generativelanguage.googleapis.com"}})
		return
	}
	if s.Fault(w, r) {
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1beta/")
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(path, "models/") && strings.HasSuffix(path, ":generateContent"):
		s.generate(w, strings.TrimSuffix(strings.TrimPrefix(path, "models/"), ":generateContent"), rec.Body)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "models/") && strings.HasSuffix(path, ":predictLongRunning"):
		s.predict(w, strings.TrimSuffix(strings.TrimPrefix(path, "models/"), ":predictLongRunning"), rec.Body)
	case r.Method == http.MethodGet && strings.Contains(path, "/operations/"):
		s.operation(w, path)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "files/") && strings.HasSuffix(path, ":download"):
		if r.URL.Query().Get("alt") != "media" {
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "alt=media is required to download")
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(path, "files/"), ":download")
		if t, ok := s.Peek(id); !ok || t.State != faketask.Succeeded {
			Status(w, http.StatusNotFound, "NOT_FOUND", "File "+id+" not found.")
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(fakeupstream.MP4)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "models/") && !strings.Contains(strings.TrimPrefix(path, "models/"), "/"):
		name := strings.TrimPrefix(path, "models/")
		if !known(name) {
			Status(w, http.StatusNotFound, "NOT_FOUND", "models/"+name+" is not found for API version v1beta.")
			return
		}
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"name": "models/" + name, "displayName": name, "version": "001"})
	default:
		Status(w, http.StatusNotFound, "NOT_FOUND", "no such method "+r.Method+" "+r.URL.Path)
	}
}

func known(model string) bool {
	return strings.HasPrefix(model, "gemini-") || strings.HasPrefix(model, "veo-")
}

type part struct {
	Text       *string `json:"text"`
	InlineData *struct {
		MIMEType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
}

type generateBody struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	} `json:"contents"`
	SystemInstruction any `json:"systemInstruction"`
	SafetySettings    []struct {
		Category  string `json:"category"`
		Threshold string `json:"threshold"`
	} `json:"safetySettings"`
	GenerationConfig *struct {
		ResponseModalities []string `json:"responseModalities"`
		CandidateCount     *int     `json:"candidateCount"`
		Temperature        *float64 `json:"temperature"`
		Seed               *int64   `json:"seed"`
		ImageConfig        *struct {
			AspectRatio string `json:"aspectRatio"`
			ImageSize   string `json:"imageSize"`
		} `json:"imageConfig"`
	} `json:"generationConfig"`
}

var ratios = []string{"1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"}

func (s *Server) generate(w http.ResponseWriter, model string, body []byte) {
	var b generateBody
	if err := faketask.Strict(body, &b); err != nil {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if !known(model) {
		Status(w, http.StatusNotFound, "NOT_FOUND", "models/"+model+" is not found for API version v1beta, or is not supported for generateContent.")
		return
	}
	if len(b.Contents) == 0 {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	var prompt string
	for i, c := range b.Contents {
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("contents[%d].role must be user or model", i))
			return
		}
		if len(c.Parts) == 0 {
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i))
			return
		}
		for j, p := range c.Parts {
			switch {
			case p.Text != nil && p.InlineData == nil:
				prompt += *p.Text
			case p.Text == nil && p.InlineData != nil:
				data, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
				if err != nil || len(data) == 0 || !strings.HasPrefix(p.InlineData.MIMEType, "image/") {
					Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("contents[%d].parts[%d].inline_data is not a base64 image", i, j))
					return
				}
			default:
				Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("contents[%d].parts[%d] must have exactly one of text or inline_data", i, j))
				return
			}
		}
	}
	image := false
	if gc := b.GenerationConfig; gc != nil {
		for _, m := range gc.ResponseModalities {
			switch m {
			case "IMAGE":
				image = true
			case "TEXT":
			default:
				Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value at 'generation_config.response_modalities': "+m)
				return
			}
		}
		if ic := gc.ImageConfig; ic != nil {
			if ic.AspectRatio != "" && !slices.Contains(ratios, ic.AspectRatio) {
				Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Unsupported aspect ratio: "+ic.AspectRatio)
				return
			}
			if ic.ImageSize != "" && !slices.Contains([]string{"1K", "2K", "4K"}, ic.ImageSize) {
				Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Unsupported image size: "+ic.ImageSize)
				return
			}
		}
	}
	if image && !strings.Contains(model, "image") {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Model does not support the requested response modalities: image")
		return
	}
	usage := map[string]any{"promptTokenCount": 12, "candidatesTokenCount": 1290, "totalTokenCount": 1302}
	switch {
	case strings.Contains(prompt, "[refuse]"):
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"promptFeedback": map[string]any{"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": usage, "modelVersion": model})
		return
	case strings.Contains(prompt, "[refuse-output]"):
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model"}, "finishReason": "IMAGE_SAFETY", "index": 0}},
			"usageMetadata": usage, "modelVersion": model})
		return
	case strings.Contains(prompt, "[fail]") || !image:
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model",
			"parts": []any{map[string]any{"text": "I can only describe it."}}}, "finishReason": "NO_IMAGE", "index": 0}}, "usageMetadata": usage, "modelVersion": model})
		return
	}
	png := fakeupstream.PNG(prompt)
	faketask.WriteJSON(w, http.StatusOK, map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{
			map[string]any{"text": "Here is the picture."},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(png)}},
		}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": usage, "modelVersion": model, "responseId": "resp-1"})
}

type image struct {
	BytesBase64Encoded string `json:"bytesBase64Encoded"`
	MIMEType           string `json:"mimeType"`
}

type predictBody struct {
	Instances []struct {
		Prompt          *string `json:"prompt"`
		Image           *image  `json:"image"`
		LastFrame       *image  `json:"lastFrame"`
		ReferenceImages []struct {
			Image         *image `json:"image"`
			ReferenceType string `json:"referenceType"`
		} `json:"referenceImages"`
		Video *struct {
			URI string `json:"uri"`
		} `json:"video"`
	} `json:"instances"`
	Parameters *struct {
		AspectRatio      string `json:"aspectRatio"`
		DurationSeconds  *int   `json:"durationSeconds"`
		Resolution       string `json:"resolution"`
		NegativePrompt   string `json:"negativePrompt"`
		PersonGeneration string `json:"personGeneration"`
		SampleCount      *int   `json:"sampleCount"`
		EnhancePrompt    *bool  `json:"enhancePrompt"`
	} `json:"parameters"`
}

func (s *Server) predict(w http.ResponseWriter, model string, body []byte) {
	var b predictBody
	if err := faketask.Strict(body, &b); err != nil {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if !strings.HasPrefix(model, "veo-") {
		Status(w, http.StatusNotFound, "NOT_FOUND", "models/"+model+" is not found for API version v1beta, or is not supported for predictLongRunning.")
		return
	}
	if len(b.Instances) != 1 || b.Instances[0].Prompt == nil || *b.Instances[0].Prompt == "" {
		Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "exactly one instance with a prompt is required")
		return
	}
	veo2 := strings.HasPrefix(model, "veo-2")
	if p := b.Parameters; p != nil {
		d := 8
		if p.DurationSeconds != nil {
			d = *p.DurationSeconds
		}
		switch {
		case p.AspectRatio != "" && p.AspectRatio != "16:9" && p.AspectRatio != "9:16":
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "aspectRatio must be 16:9 or 9:16")
			return
		case veo2 && (d < 5 || d > 8), !veo2 && d != 4 && d != 6 && d != 8:
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("The number value for `durationSeconds` is out of bound: %d", d))
			return
		case p.Resolution != "" && !slices.Contains([]string{"720p", "1080p", "4k"}, p.Resolution):
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "resolution must be 720p, 1080p or 4k")
			return
		case p.Resolution != "" && p.Resolution != "720p" && (veo2 || d != 8):
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "1080p and 4k are only supported for 8 second videos on Veo 3")
			return
		case p.SampleCount != nil && (*p.SampleCount < 1 || *p.SampleCount > 4):
			Status(w, http.StatusBadRequest, "INVALID_ARGUMENT", "sampleCount out of bound")
			return
		}
	}
	prompt := *b.Instances[0].Prompt
	t := s.NewTask("op", "video", "", prompt)
	s.SetExtra(t.ID, "model", model)
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"name": "models/" + model + "/operations/" + t.ID})
}

func (s *Server) operation(w http.ResponseWriter, path string) {
	i := strings.LastIndex(path, "/operations/")
	id := path[i+len("/operations/"):]
	t, ok := s.Peek(id)
	if !ok || "models/"+t.Extra["model"] != path[:i] {
		Status(w, http.StatusNotFound, "NOT_FOUND", "Operation "+path+" not found.")
		return
	}
	if strings.Contains(t.Prompt, "[refuse]") {
		// Veo judges the prompt once the operation runs: the operation ends filtered.
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"name": path, "done": true, "response": map[string]any{
			"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"raiMediaFilteredCount": 1, "raiMediaFilteredReasons": []string{
				"Your prompt contains words that violate our usage guidelines. You will not be charged for blocked videos."}}}})
		return
	}
	t, _ = s.Poll(id)
	out := map[string]any{"name": path, "metadata": map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningMetadata"}}
	switch t.State {
	case faketask.Succeeded:
		out["done"] = true
		out["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": []any{map[string]any{"video": map[string]any{
				"uri": s.URL + "/files/" + t.ID + ":download?alt=media"}}}}}
	case faketask.Failed:
		out["done"] = true
		if t.Outcome == "refuse" {
			out["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
				"generateVideoResponse": map[string]any{"raiMediaFilteredCount": 1, "raiMediaFilteredReasons": []string{
					"We encountered an issue with the audio for your prompt. You will not be charged."}}}
		} else {
			out["error"] = map[string]any{"code": 13, "message": "Video generation failed due to an internal error.", "status": "INTERNAL"}
		}
	}
	faketask.WriteJSON(w, http.StatusOK, out)
}

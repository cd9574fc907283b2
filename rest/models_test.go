package rest_test

import (
	"slices"
	"testing"

	"studio/models/contract"
)

func TestAvailableModelsListsImageFamiliesAndChannels(t *testing.T) {
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	e.admin(map[string]any{"action": "upstream-disable", "name": "img-c"})
	for _, path := range []string{"/api/available-models", "/api/available-models?media_type=image"} {
		r := e.call("GET", path, key, nil).expect(t, 200)
		leaks(t, r.Body, "prov-", "model-img")
		if r.str("media_type") != "image" || r.str("default") != "auto" {
			t.Fatalf("%s = %s", path, r.Body)
		}
		channels := map[string]map[string]any{}
		for _, c := range r.JSON["channels"].([]any) {
			m := c.(map[string]any)
			channels[m["name"].(string)] = m
		}
		if len(channels) != 3 || channels["chat-a"] != nil {
			t.Fatalf("channels = %v, want the three image channels", channels)
		}
		if a := channels["img-a"]; a["family"] != "gen2" || a["available"] != true ||
			!slices.Equal(strs(a["capabilities"]), []string{"large", "quality", "reference_images", "transparent"}) {
			t.Fatalf("img-a = %v", a)
		}
		if c := channels["img-c"]; c["available"] != false {
			t.Fatalf("disabled img-c = %v, want available false", c)
		}
		families := map[string]map[string]any{}
		for _, f := range r.JSON["families"].([]any) {
			m := f.(map[string]any)
			families[m["name"].(string)] = m
		}
		gen2, gen3 := families["gen2"], families["gen3"]
		if gen2 == nil || !slices.Equal(strs(gen2["channels"]), []string{"img-a", "img-b"}) || gen2["available"] != true ||
			!slices.Equal(strs(gen2["capabilities"]), []string{"large", "quality", "reference_images", "transparent"}) {
			t.Fatalf("gen2 = %v", gen2)
		}
		if gen3 == nil || gen3["available"] != false || len(strs(gen3["capabilities"])) != 0 {
			t.Fatalf("gen3 with its only channel disabled = %v", gen3)
		}
	}
}

// strs returns a JSON array of strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestAvailableModelsListsVideoTiers(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	r := e.call("GET", "/api/available-models?media_type=video", key, nil).expect(t, 200)
	leaks(t, r.Body, "local", "vid-a-1")
	tiers := r.JSON["tiers"].([]any)
	want := contract.Tiers()
	if r.str("media_type") != "video" || len(tiers) != len(want) {
		t.Fatalf("video catalogue = %s", r.Body)
	}
	for i, w := range want {
		got := tiers[i].(map[string]any)
		if got["code"] != w.Code || got["min_duration"] != float64(w.MinDuration) || got["max_duration"] != float64(w.MaxDuration) ||
			got["default_resolution"] != w.DefaultResolution() || got["available"] != true {
			t.Errorf("tier %d = %v, want %+v", i, got, w)
		}
		var res []string
		for _, x := range got["resolutions"].([]any) {
			res = append(res, x.(map[string]any)["resolution"].(string))
		}
		if !slices.Equal(res, w.Resolutions) {
			t.Errorf("tier %s resolutions = %v, want %v", w.Code, res, w.Resolutions)
		}
	}
	if a25 := tiers[3].(map[string]any); a25["max_duration"] != 30.0 {
		t.Errorf("tier A 2.5 = %v, want 4 to 30 s", a25)
	}
}

func TestAvailableModelsForEveryIdentity(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	_, member := e.member(key, map[string]any{"email": "m@example.com"})
	_, login := e.personalLogin("me@example.com", 0)
	for _, cred := range []string{key, member, login, e.adminKey} {
		e.callH("GET", "/api/available-models", map[string]string{"Authorization": "Bearer " + cred}, nil).expect(t, 200)
	}
	e.call("GET", "/api/available-models", "", nil).expect(t, 401)
	r := e.call("GET", "/api/available-models?media_type=audio", key, nil).expect(t, 400)
	if r.str("error") == "" {
		t.Fatal("an unknown media_type must say why")
	}
}

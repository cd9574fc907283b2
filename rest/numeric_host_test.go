package rest_test

import (
	"strings"
	"testing"
)

// numericHosts are IPv4 addresses written in forms other than the dotted quad: clients read them as
// 127.0.0.1 (or another address), Go's resolver as names. Each is refused at submit.
var numericHosts = []string{"2130706433", "127.1", "0x7f.1", "0177.0.0.1", "0x7f000001", "017700000001", "127.0.1",
	"0x7F.0.0.1", "1.2.3.0x4", "999.1.1.1", "1.2.3.4.5", "00127.0.0.1", "127.0.0.01", "0x", "example.0x10", "3232235521."}

// TestNumericHostFormsAreRefusedAtSubmit: a callback_url or an input picture whose host is a numeric
// address not written as a dotted quad is refused with 400 naming the form to use, whether private
// addresses are allowed or not, and nothing is charged; a canonical dotted quad goes through the
// private-address check as before.
func TestNumericHostFormsAreRefusedAtSubmit(t *testing.T) {
	for _, allow := range []string{"false", "true"} {
		t.Run("allow-private-"+allow, func(t *testing.T) {
			e := newEnv(t, withVar("SERVICE_ALLOW_PRIVATE_URLS", allow))
			_, key := e.tenant("Acme", 100)
			for _, host := range numericHosts {
				for _, body := range []map[string]any{
					{"prompt": "x", "callback_url": "http://" + host + "/cb"},
					{"prompt": "x", "reference_images": []string{"http://" + host + ":8080/a.png"}},
					{"prompt": "x", "image_url": "https://" + host + "/a.png", "mask": "https://" + host + "/m.png"},
				} {
					r := e.call("POST", "/api/generate", key, body)
					if r.Status != 400 || !strings.Contains(r.str("error"), "dotted quad") {
						t.Errorf("host %s in %v: %d %s, want 400 naming the dotted quad", host, body, r.Status, r.Body)
					}
				}
				r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 5, "images": []string{"http://" + host + "/a.png"}})
				if r.Status != 400 {
					t.Errorf("host %s in a video's images: %d %s, want 400", host, r.Status, r.Body)
				}
			}
			if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 100 {
				t.Fatalf("credits %v after refused submits, want 100", b.num("credits"))
			}
			// The canonical forms go through the private-address rule.
			r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "callback_url": "http://127.0.0.1:1/cb"})
			if allow == "false" && (r.Status != 400 || !strings.Contains(r.str("error"), "SERVICE_ALLOW_PRIVATE_URLS")) {
				t.Errorf("loopback dotted quad with private addresses refused: %d %s, want 400 naming the setting", r.Status, r.Body)
			}
			if allow == "true" && r.Status != 200 {
				t.Errorf("loopback dotted quad with private addresses allowed: %d %s, want 200", r.Status, r.Body)
			}
		})
	}
}

package server

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/cmd/server/httpmw"
	"studio/rest"
)

// withMiddleware puts the router of every surface behind the shared HTTP middleware (cmd/server/httpmw),
// outermost first: HSTS (over https), request ids, access logs, security headers and the panic guard,
// then the text guard; Prometheus metrics are recorded per matched route (a router middleware). Refused
// requests and panics are answered in REST's error form, the one of every surface.
func (s *Service) withMiddleware(r *mux.Router) http.Handler {
	r.Use(httpmw.Metrics)
	guarded := httpmw.TextGuard(r, rest.MaxTextBody, rest.WriteError)
	return httpmw.HSTS(s.App.Config.BaseURL, httpmw.Middleware(guarded, rest.WriteError))
}

// Package client is studio's typed Go client, generated from rest/openapi.yaml by oapi-codegen and
// committed. It is a module of its own (studio/rest/client), so that an integrator's program imports it
// without the server's dependencies; the server's module uses it through a replace directive. After
// changing the document, run `go generate ./rest` from the repository root; CI fails when the committed
// client differs from a fresh one.
package client

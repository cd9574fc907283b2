package client

// The client is generated from rest/openapi.yaml and committed; CI regenerates it and fails when the
// committed file differs. After changing the document run: go generate ./rest/client
//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../openapi.yaml

package rest

// The typed client (rest/client, a module of its own) is generated from openapi.yaml by the
// oapi-codegen tool of this module.
//go:generate go tool oapi-codegen -config client/oapi-codegen.yaml openapi.yaml

// Package contract holds the code contracts of studio templates: the field
// standard, placeholder syntax and substitution, the generation config rules of
// image, copy and video templates, the variable whitelist, video tiers, image
// request enums and credit costs.
//
// The same Go values serve validation and GET /api/doc-contracts (see
// Document), so the published contract cannot drift from the enforced one.
//
// Decisions this package makes where the interface specification is silent:
//
//   - Placeholder syntax: a placeholder is "{", a key matching KeyPattern, and
//     "}" with nothing in between (no spaces). Anything else is literal text:
//     "{ }", "{{", "}}", "{1a}", "{标题}", `{"a":1}`. Templates are scanned left
//     to right once, so "{{title}}" is a literal "{", the placeholder {title}
//     and a literal "}". There is no escape: a template cannot contain a literal
//     "{key}" for a key that is not substituted.
//   - A generation config has exactly one mode: form (prompt_template, with
//     fields declaring its placeholders) or spec (skill_spec_md). Both present
//     or neither present is rejected; fields are rejected in spec mode.
//     Whitespace-only text counts as absent.
//   - A field with options must be a select field; option values are unique.
//   - Enum values (quality, format, resolutions) are case-sensitive and exact.
//   - A video config's model "" means auto; duration 0 means "not fixed by the
//     template" (the submit supplies it).
//
// Errors of validation are *ValidationError values whose messages name the
// offending member (for example "fields[2].options: a select field needs at
// least one option") and are fit for an HTTP 400 body. Missing required input
// at generation time is a *MissingFieldsError.
package contract

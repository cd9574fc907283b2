package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// The defaults of the document bounds (Options).
const (
	defaultMaxQueryBytes    = 64 << 10
	defaultMaxTokens        = 10_000
	defaultMaxNesting       = 32
	defaultMaxFields        = 1000
	defaultMaxRepeatedField = 10
)

// codeQueryLimit is the extension code of a document refused by its bounds; like a validation error it
// is answered 422 over HTTP and with an "error" message over WebSocket.
const codeQueryLimit = "QUERY_LIMIT_EXCEEDED"

func init() { errcode.RegisterErrorType(codeQueryLimit, errcode.KindProtocol) }

// documentBounds refuses a document that is too large before gqlparser validates it: validation (the
// rule that fields of one response name can be merged, above all) grows with the square of the fields,
// and gqlgen runs it to the end whatever the request's context says. The checks run on the raw text of
// every operation, whatever its transport (POST, GET, a WebSocket subscribe message), in order of cost:
// its length in bytes; a lexer pass that counts tokens and the nesting of brackets without building
// anything; then a parse (at most maxTokens tokens) and a walk that counts the fields as validation
// will see them (aliases included, fragments expanded once per spread), the fields at one response path,
// and the introspection fields of an operation (which the complexity limit does not weigh). Each step is
// linear in the document and stops at the first bound passed; a document whose syntax is wrong is left
// to gqlgen, which reports it. Documents gqlgen already validated (its query cache) skip the checks.
type documentBounds struct {
	maxBytes, maxTokens, maxNesting, maxFields, maxRepeated int
	// validated is gqlgen's cache of validated documents.
	validated graphql.Cache[*ast.QueryDocument]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentBounds{}

// ExtensionName names the extension.
func (documentBounds) ExtensionName() string { return "DocumentBounds" }

// Validate accepts any schema.
func (documentBounds) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters checks the document before gqlgen parses and validates it.
func (b documentBounds) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if err := ctx.Err(); err != nil {
		// The client left (or the connection ended): nothing more is worth doing for it.
		return gqlerror.Errorf("the request ended before its document was checked: %v", err)
	}
	if b.validated != nil {
		if _, ok := b.validated.Get(ctx, p.Query); ok {
			return nil
		}
	}
	return b.check(p.Query)
}

// check applies the bounds to one document.
func (b documentBounds) check(query string) *gqlerror.Error {
	if len(query) > b.maxBytes {
		return limitError("the GraphQL document is %d bytes, above the limit of %d (MaxQueryBytes); send a shorter "+
			"document, with long values as variables", len(query), b.maxBytes)
	}
	if err := b.lex(query); err != nil {
		return err
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, b.maxTokens)
	if err != nil {
		return nil // gqlgen parses it again and answers the syntax error
	}
	w := fieldWalk{bounds: b, fragments: map[string]*fragmentCount{}}
	for _, f := range doc.Fragments {
		w.fragments[f.Name] = &fragmentCount{def: f}
	}
	for _, op := range doc.Operations {
		if err := w.operation(op.SelectionSet); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		// Validation checks every fragment definition on its own as well.
		c, err := w.fragment(f.Name)
		if err != nil {
			return err
		}
		if c != nil {
			if err := w.add(c.fields); err != nil {
				return err
			}
		}
	}
	return nil
}

// lex counts the tokens of query and the nesting of its brackets in one pass of the lexer; a lexical
// error is left to the parser, which reports it with its position.
func (b documentBounds) lex(query string) *gqlerror.Error {
	lx := lexer.New(&ast.Source{Input: query})
	tokens, nesting := 0, 0
	for {
		tok, err := lx.ReadToken()
		if err != nil {
			return nil
		}
		switch tok.Kind {
		case lexer.EOF:
			return nil
		case lexer.Comment:
			continue
		case lexer.BraceL, lexer.BracketL, lexer.ParenL:
			nesting++
			if nesting > b.maxNesting {
				return limitError("the GraphQL document nests brackets more than %d deep (MaxNesting); flatten the "+
					"query", b.maxNesting)
			}
		case lexer.BraceR, lexer.BracketR, lexer.ParenR:
			nesting--
		}
		tokens++
		if tokens > b.maxTokens {
			return limitError("the GraphQL document has more than %d tokens (MaxTokens); split it into smaller "+
				"operations", b.maxTokens)
		}
	}
}

// fieldWalk counts the fields of a parsed document as validation sees them: in all, and per response
// path (the response names from the operation down to the field, e.g. jobs.edges.node.id). Validation
// compares every two fields that answer at one path, and through them their sub-selections, so its work
// grows with the sum over paths of the square of their fields: bounding the fields at one path (and the
// fields in all) bounds it.
type fieldWalk struct {
	bounds    documentBounds
	total     int
	fragments map[string]*fragmentCount
}

// fragmentCount is what one fragment brings where it is spread: its fields (expanded), and its fields
// per response path relative to the selection it is spread in.
type fragmentCount struct {
	def      *ast.FragmentDefinition
	visiting bool
	done     bool
	fields   int
	schemas  int // __schema fields
	types    int // __type fields
	paths    map[string]int
}

// operation counts the fields of an operation and checks the fields at each of its paths.
func (w *fieldWalk) operation(set ast.SelectionSet) *gqlerror.Error {
	paths := map[string]int{}
	n, err := w.collect(set, "", paths)
	if err != nil {
		return err
	}
	if err := w.add(n.fields); err != nil {
		return err
	}
	// The complexity limit does not weigh introspection: each __schema answers the whole schema, each
	// __type a whole type.
	if n.schemas > maxSchemaFields {
		return limitError("the GraphQL operation asks for __schema %d times, above the limit of %d; ask for it once",
			n.schemas, maxSchemaFields)
	}
	if n.types > maxTypeFields {
		return limitError("the GraphQL operation asks for __type %d times, above the limit of %d; ask for "+
			"__schema { types { ... } } instead", n.types, maxTypeFields)
	}
	return w.repeated(paths)
}

// tally is what collect counts in a selection.
type tally struct {
	fields  int
	schemas int // __schema fields
	types   int // __type fields
}

// The introspection fields one operation may ask for.
const (
	maxSchemaFields = 1
	maxTypeFields   = 10
)

// add adds n fields to the document's total.
func (w *fieldWalk) add(n int) *gqlerror.Error {
	w.total += n
	if w.total > w.bounds.maxFields {
		return w.tooManyFields()
	}
	return nil
}

func (w *fieldWalk) tooManyFields() *gqlerror.Error {
	return limitError("the GraphQL document has more than %d fields (MaxFields; aliases count, and a fragment "+
		"counts its fields at every spread); ask for fewer fields or split it into several operations", w.bounds.maxFields)
}

// collect returns the fields of set (fragments expanded) and counts them per response path under
// prefix into paths. It stops as soon as they, with the fields of the document counted before, pass
// the bound.
func (w *fieldWalk) collect(set ast.SelectionSet, prefix string, paths map[string]int) (tally, *gqlerror.Error) {
	var n tally
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			name := s.Alias
			if name == "" {
				name = s.Name
			}
			path := join(prefix, name)
			paths[path]++
			sub, err := w.collect(s.SelectionSet, path, paths)
			if err != nil {
				return tally{}, err
			}
			n.fields += 1 + sub.fields
			n.schemas += sub.schemas
			n.types += sub.types
			switch s.Name {
			case "__schema":
				n.schemas++
			case "__type":
				n.types++
			}
		case *ast.InlineFragment:
			sub, err := w.collect(s.SelectionSet, prefix, paths)
			if err != nil {
				return tally{}, err
			}
			n.fields += sub.fields
			n.schemas += sub.schemas
			n.types += sub.types
		case *ast.FragmentSpread:
			c, err := w.fragment(s.Name)
			if err != nil {
				return tally{}, err
			}
			if c == nil {
				continue // unknown, or spread within itself: validation refuses it
			}
			if w.total+n.fields+c.fields > w.bounds.maxFields {
				return tally{}, w.tooManyFields()
			}
			n.fields += c.fields
			n.schemas += c.schemas
			n.types += c.types
			for rel, count := range c.paths {
				paths[join(prefix, rel)] += count
			}
		}
		if w.total+n.fields > w.bounds.maxFields {
			return tally{}, w.tooManyFields()
		}
	}
	return n, nil
}

// join appends a response name to a path.
func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// fragment returns the count of a fragment, made once and checked on its own (validation checks every
// fragment definition by itself too); nil for an unknown fragment or one spread inside itself.
func (w *fieldWalk) fragment(name string) (*fragmentCount, *gqlerror.Error) {
	c := w.fragments[name]
	if c == nil || c.visiting {
		return nil, nil
	}
	if c.done {
		return c, nil
	}
	c.visiting = true
	paths := map[string]int{}
	n, err := w.collect(c.def.SelectionSet, "", paths)
	c.visiting = false
	if err != nil {
		return nil, err
	}
	if err := w.repeated(paths); err != nil {
		return nil, err
	}
	c.fields, c.schemas, c.types, c.paths, c.done = n.fields, n.schemas, n.types, paths, true
	return c, nil
}

// repeated refuses a document where too many fields answer at one response path.
func (w *fieldWalk) repeated(paths map[string]int) *gqlerror.Error {
	worst, most := "", 0
	for path, n := range paths {
		if n > most || n == most && path < worst {
			worst, most = path, n
		}
	}
	if most > w.bounds.maxRepeated {
		return limitError("the GraphQL document has %d fields answering at %s, above the limit of %d "+
			"(MaxRepeatedField; aliases and fragments spread there count); ask for each field once", most, worst, w.bounds.maxRepeated)
	}
	return nil
}

// limitError is the error of a refused document: code QUERY_LIMIT_EXCEEDED (422 over HTTP).
func limitError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	err.Extensions = map[string]any{"code": codeQueryLimit}
	return err
}

// precheckBody refuses, before gqlgen decodes it, a POST body whose query is longer than the bound:
// decoding the JSON of a long document is most of what refusing it costs. It reads the body (already
// bounded by maxBody), and gives it back to the request unless it answered; any body it cannot read
// plainly (no top-level "query" string) is left to gqlgen.
func (b documentBounds) precheckBody(w http.ResponseWriter, req *http.Request) bool {
	var body []byte
	var err error
	if whole, ok := req.Body.(interface{ Bytes() []byte }); ok {
		body = whole.Bytes() // read whole already (httpmw.TextGuard): no second copy; gqlgen still reads it
	} else {
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err != nil || len(body) <= b.maxBytes {
		return false // the query cannot be longer than the body; a body too large is gqlgen's to answer
	}
	raw, ok := jsonMember(body, "query")
	if !ok || len(raw) <= b.maxBytes {
		return false
	}
	n := unescapedLen(raw)
	if n <= b.maxBytes {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": gqlerror.List{limitError("the GraphQL document is "+
		"%d bytes, above the limit of %d (MaxQueryBytes); send a shorter document, with long values as variables",
		n, b.maxBytes)}, "data": nil})
	return true
}

// jsonMember returns the raw text (between the quotes, escapes kept) of the string member name of the
// JSON object doc, without decoding the document; false when doc is not an object or the member is
// absent or not a string.
func jsonMember(doc []byte, name string) ([]byte, bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != '"' {
			return nil, false
		}
		end, ok := skipString(doc, i)
		if !ok {
			return nil, false
		}
		key := doc[i+1 : end-1]
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return nil, false
		}
		i = skipSpace(doc, i+1)
		end, ok = skipValue(doc, i)
		if !ok {
			return nil, false
		}
		if string(key) == name {
			if doc[i] != '"' {
				return nil, false
			}
			return doc[i+1 : end-1], true
		}
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ',' {
			return nil, false
		}
		i++
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at doc[i] (a quote).
func skipString(doc []byte, i int) (int, bool) {
	for i++; i < len(doc); {
		j := bytes.IndexByte(doc[i:], '"')
		if j < 0 {
			return 0, false
		}
		i += j
		escaped := false // an odd number of backslashes before the quote escapes it
		for k := i - 1; k >= 0 && doc[k] == '\\'; k-- {
			escaped = !escaped
		}
		if !escaped {
			return i + 1, true
		}
		i++
	}
	return 0, false
}

// skipValue returns the index after the JSON value starting at doc[i]; it does not check the value
// (gqlgen does), only finds its end.
func skipValue(doc []byte, i int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for ; i < len(doc); i++ {
			switch doc[i] {
			case '"':
				end, ok := skipString(doc, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	for ; i < len(doc); i++ { // a number, true, false or null
		switch doc[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i, true
		}
	}
	return i, true
}

// unescapedLen is the length in bytes of the JSON string whose raw text (escapes kept) is raw.
func unescapedLen(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); i++ {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return n + len(raw) - i
		}
		n += j
		i += j
		if i+1 >= len(raw) {
			n++
			continue
		}
		i++
		if raw[i] != 'u' || i+4 >= len(raw) {
			n++
			continue
		}
		r, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 32)
		i += 4
		switch {
		case err != nil:
			n++
		case r >= 0xD800 && r < 0xDC00 && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u':
			n += 4 // a surrogate pair: one rune of four bytes
			i += 6
		default:
			n += utf8.RuneLen(rune(r))
		}
	}
	return n
}

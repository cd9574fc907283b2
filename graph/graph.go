// Package graph is the GraphQL surface of studio, served at /graphql: queries and mutations over HTTP
// (POST and GET), subscriptions over WebSocket (graphql-transport-ws and the legacy graphql-ws), and
// GraphiQL for a browser. It mirrors the REST surface: every resolver authenticates the caller and calls
// the same core operation (models.App, through its domain services) as the REST endpoint, which checks the permission
// table, so refusals, validation messages, credit rules and hidden fields are the same.
//
// The schema lives in graph/*.graphqls; graph/generated.go and graph/models_gen.go are generated from it
// by `go tool gqlgen generate` (configuration: gqlgen.yml at the repository root). Resolvers are the
// hand-written files of this package.
package graph

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/vektah/gqlparser/v2/ast"

	"studio/models"
)

// Path is where the GraphQL surface is served.
const Path = "/graphql"

// Options carries what cmd/ wires into the GraphQL surface; zero limits take the defaults.
type Options struct {
	// MaxDepth bounds the nesting of a query (default 10; introspection fields are not counted).
	MaxDepth int
	// MaxComplexity bounds the complexity of an operation (default 3000; a page of jobs counts its size).
	MaxComplexity int
	// MaxSubscriptions bounds the subscriptions open at once on one WebSocket connection (default 100).
	MaxSubscriptions int
	// KeepAlive is the interval of WebSocket pings and of graphql-ws keep-alive messages (default 15 s); a
	// connection that does not answer pings for two intervals is closed.
	KeepAlive time.Duration
	// InitTimeout is how long a WebSocket connection may take to send connection_init (default 10 s).
	InitTimeout time.Duration

	// The bounds of a document (the query text of an operation, over HTTP or WebSocket), checked before
	// it is parsed and validated (see documentBounds); a document past one is refused with the code
	// QUERY_LIMIT_EXCEEDED (422 over HTTP) and a message naming the bound.

	// MaxQueryBytes bounds the length of a document (default 64 KiB).
	MaxQueryBytes int
	// MaxTokens bounds the tokens of a document (default 10 000).
	MaxTokens int
	// MaxNesting bounds the nesting of brackets ({, [, () in a document (default 32).
	MaxNesting int
	// MaxFields bounds the fields of a document, aliases included and fragments counted at each spread
	// (default 1000).
	MaxFields int
	// MaxRepeatedField bounds how many fields answer at one response path, e.g. jobs.edges.node.id
	// (default 10): validation compares each pair of them, and their sub-selections.
	MaxRepeatedField int
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// maxBody bounds a GraphQL request body, like every REST JSON body.
const maxBody = 1 << 20

// NewHandler returns the HTTP handler of /graphql.
func NewHandler(svc *models.App, opts Options) http.Handler {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 10
	}
	if opts.MaxComplexity <= 0 {
		opts.MaxComplexity = 3000
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = 100
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 10 * time.Second
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	r := &Resolver{svc: svc, maxSubscriptions: opts.MaxSubscriptions,
		setups: make(chan struct{}, maxSetups)}
	cfg := Config{Resolvers: r}
	setComplexity(&cfg.Complexity)
	srv := handler.New(NewExecutableSchema(cfg))
	srv.AddTransport(transport.Websocket{
		// Keep-alive pings (and graphql-ws "ka" messages) come from the adapter's pinger.
		Implementation: gorillaWebsocket{initTimeout: opts.InitTimeout, pinger: newPinger(opts.KeepAlive)},
		InitFunc:       r.initConnection,
	})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	validated := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(validated)
	bounds := documentBounds{
		maxBytes:    orDefault(opts.MaxQueryBytes, defaultMaxQueryBytes),
		maxTokens:   orDefault(opts.MaxTokens, defaultMaxTokens),
		maxNesting:  orDefault(opts.MaxNesting, defaultMaxNesting),
		maxFields:   orDefault(opts.MaxFields, defaultMaxFields),
		maxRepeated: orDefault(opts.MaxRepeatedField, defaultMaxRepeatedField),
		validated:   validated,
	}
	srv.Use(bounds)
	srv.SetParserTokenLimit(bounds.maxTokens)
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(opts.MaxComplexity))
	srv.Use(depthLimit{max: opts.MaxDepth})
	srv.AroundFields(checkArgumentText)
	srv.SetErrorPresenter(presentError)
	srv.SetRecoverFunc(recoverPanic)
	graphiql := playground.Handler("studio GraphQL", Path)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.Header.Get("Upgrade") == "" && strings.Contains(req.Header.Get("Accept"), "text/html") {
			graphiql(w, req)
			return
		}
		req = req.WithContext(withCredentials(req.Context(), credentialsFromHeaders(req.Header)))
		if req.Header.Get("Upgrade") != "" {
			serveWebsocket(srv, w, req)
			return
		}
		if req.Body != nil {
			if b, whole := req.Body.(interface{ Bytes() []byte }); !whole || len(b.Bytes()) > maxBody {
				req.Body = http.MaxBytesReader(w, req.Body, maxBody)
			} // else read whole and within the bound already (httpmw.TextGuard)
			if req.Method == http.MethodPost && bounds.precheckBody(w, req) {
				return
			}
		}
		w, req = withHTTPStatus(w, req)
		srv.ServeHTTP(w, req)
	})
}

// checkArgumentText refuses text that cannot be stored (a NUL character, invalid UTF-8) in the arguments
// of a root field, whether sent as variables (over HTTP or WebSocket) or written in the query, with the
// rule the other surfaces use (models.CheckText). HTTP bodies were already checked by the REST guard.
func checkArgumentText(ctx context.Context, next graphql.Resolver) (any, error) {
	if fc := graphql.GetFieldContext(ctx); fc != nil && len(fc.Args) > 0 {
		switch fc.Object {
		case "Query", "Mutation", "Subscription":
			if err := models.CheckArgs("", fc.Args); err != nil {
				return nil, err
			}
		}
	}
	return next(ctx)
}

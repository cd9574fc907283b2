package main

// The command-line client: `studio login`, `studio generate`, ... talk to a studio server over HTTP.
// This file holds the one small client type, the stored credentials, errors and exit codes, and the
// progress display; each client_*.go file holds a group of commands. Every call of the studio API goes
// through the typed client generated from rest/openapi.yaml (studio/rest/client), so the commands prove
// that client; only the direct upload to a presigned media-store URL and downloads are plain HTTP.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	restclient "studio/rest/client"
)

// Exit codes of the client commands, for scripts (also listed by GET /api/cli-guide).
const (
	exitOK          = 0 // success
	exitUsage       = 1 // usage error, network error, or any other failure
	exitAuth        = 2 // not signed in, login expired, or the credential may not do this (HTTP 401, 403)
	exitCredits     = 3 // not enough credits (HTTP 402)
	exitNotFound    = 4 // no such job, template or task (HTTP 404)
	exitJobFailed   = 5 // the job or video task ended failed or cancelled
	exitRateLimited = 6 // rate limited (HTTP 429)
)

// exitCodes documents the exit codes in the CLI guide.
var exitCodes = []GuideExitCode{
	{exitOK, "success"},
	{exitUsage, "usage error, network error or other failure"},
	{exitAuth, "not signed in, login expired, or the credential may not do this (HTTP 401, 403)"},
	{exitCredits, "not enough credits (HTTP 402)"},
	{exitNotFound, "not found (HTTP 404)"},
	{exitJobFailed, "the job or video task failed or was cancelled"},
	{exitRateLimited, "rate limited (HTTP 429); retry later"},
}

// groupClient and groupServer group the commands in help and in the CLI guide.
const (
	groupClient = "client"
	groupServer = "server"
)

// defaultBaseURL is the server a client talks to without SERVICE_BASE_URL or a stored login.
const defaultBaseURL = "http://127.0.0.1:8080"

// apiError is an answer of the server with a status of 400 or more.
type apiError struct {
	Status  int
	Message string
	Code    string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// exitCode maps the HTTP status to the client's exit code.
func (e *apiError) exitCode() int {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return exitAuth
	case http.StatusPaymentRequired:
		return exitCredits
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusTooManyRequests:
		return exitRateLimited
	}
	return exitUsage
}

// credentials is what `studio login` stores in the user's configuration directory.
type credentials struct {
	BaseURL   string    `json:"base_url"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	Email     string    `json:"email,omitempty"`
}

// credentialsPath is os.UserConfigDir()/studio/credentials.json.
func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for the login: %w", err)
	}
	return filepath.Join(dir, "studio", "credentials.json"), nil
}

// loadCredentials returns the stored login, or nil when there is none.
func loadCredentials() *credentials {
	p, err := credentialsPath()
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var c credentials
	if json.Unmarshal(b, &c) != nil || c.Token == "" {
		return nil
	}
	return &c
}

// saveCredentials writes the login readable by the user only (0600, directory 0700).
func saveCredentials(c *credentials) (string, error) {
	p, err := credentialsPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(p), ".credentials-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return p, os.Rename(tmp.Name(), p)
}

// client is one command's connection to a studio server.
type client struct {
	base   string
	cred   string
	http   *http.Client
	out    io.Writer // results
	errw   io.Writer // progress and notes
	asJSON bool
}

// newClient builds the client of a command: SERVICE_BASE_URL (else the stored login's server, else
// http://127.0.0.1:8080), and SERVICE_API_KEY, which wins over the stored login. The stored token is sent
// only to the server it was issued by.
func newClient(c *cobra.Command) *client {
	stored := loadCredentials()
	base := strings.TrimRight(strings.TrimSpace(os.Getenv("SERVICE_BASE_URL")), "/")
	if base == "" && stored != nil {
		base = stored.BaseURL
	}
	if base == "" {
		base = defaultBaseURL
	}
	cred := strings.TrimSpace(os.Getenv("SERVICE_API_KEY"))
	if cred == "" && stored != nil && strings.TrimRight(stored.BaseURL, "/") == base {
		cred = stored.Token
	}
	asJSON, _ := c.Flags().GetBool("json")
	return &client{base: base, cred: cred, http: &http.Client{}, out: c.OutOrStdout(), errw: c.ErrOrStderr(), asJSON: asJSON}
}

// requestTimeout bounds one JSON call (uploads and downloads are bounded by their size instead).
const requestTimeout = time.Minute

// apiCall is one call of the generated REST client.
type apiCall func(ctx context.Context, api *restclient.Client) (*http.Response, error)

// do runs a call of the generated REST client within the request timeout and reads its answer (see answer).
func (c *client) do(ctx context.Context, out any, call apiCall) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.doUnbounded(ctx, out, call)
}

// doUnbounded runs a call of the generated REST client (bounded by ctx only, for uploads) and reads its answer.
func (c *client) doUnbounded(ctx context.Context, out any, call apiCall) ([]byte, error) {
	api, err := restclient.NewClient(c.base, restclient.WithHTTPClient(c.http), restclient.WithRequestEditorFn(c.authorize))
	if err != nil {
		return nil, fmt.Errorf("the server address %q is not a URL: %w", c.base, err)
	}
	res, err := call(ctx, api)
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return nil, fmt.Errorf("cannot reach the studio server at %s: %w", c.base, err)
	}
	return c.answer(res, out)
}

// authorize adds the client's headers and credential to every API request.
func (c *client) authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "studio-cli/"+version)
	if c.cred != "" {
		req.Header.Set("Authorization", "Bearer "+c.cred)
	}
	return nil
}

// jsonBody encodes a request body for the generated client's ...WithBody calls.
func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// answer reads a JSON answer and decodes a 2xx answer into out (when not nil); it returns the raw answer
// for --json output. An answer of 400 or more is an *apiError with the body's message and code.
func (c *client) answer(res *http.Response, out any) ([]byte, error) {
	defer res.Body.Close()
	path := res.Request.URL.Path
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", path, err)
	}
	if res.StatusCode >= 400 {
		e := &apiError{Status: res.StatusCode}
		var body struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(raw, &body) == nil {
			e.Message, e.Code = body.Error, body.Code
		}
		if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" && e.Message != "" {
			e.Message += " (retry after " + res.Header.Get("Retry-After") + " s)"
		}
		return raw, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("unexpected answer from %s: %w", path, err)
		}
	}
	return raw, nil
}

// needCredential fails early, with the auth exit code, when the command has nothing to authenticate with.
func (c *client) needCredential() error {
	if c.cred == "" {
		return &exitError{code: exitAuth, err: fmt.Errorf("not signed in to %s: run `studio login` or set SERVICE_API_KEY", c.base)}
	}
	return nil
}

// printJSON writes a raw JSON answer indented, for --json.
func (c *client) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := c.out.Write(buf.Bytes())
	return err
}

// printf writes a human-readable result line.
func (c *client) printf(format string, a ...any) { fmt.Fprintf(c.out, format, a...) }

// download saves a URL's body to path (through a temporary file in the same directory).
func (c *client) download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "studio-cli/"+version)
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: %s", url, res.Status)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".studio-download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, res.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("download %s: %w", url, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := saveOutput(tmp.Name(), path); err != nil {
		return fmt.Errorf("%w (the result stays at %s)", err, url)
	}
	return nil
}

// progress shows that the client is waiting: a spinner with a status line on a terminal, plain dots otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	frame int
	msg   string
	dots  bool
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// status sets the message; off a terminal a new message starts a line and a repeated one adds a dot.
func (p *progress) status(msg string) {
	if p.tty {
		p.msg = msg
		p.draw()
		return
	}
	if msg != p.msg {
		if p.dots {
			fmt.Fprintln(p.w)
		}
		fmt.Fprint(p.w, msg)
		p.msg, p.dots = msg, true
		return
	}
	fmt.Fprint(p.w, ".")
}

func (p *progress) draw() {
	p.frame = (p.frame + 1) % len(spinnerFrames)
	fmt.Fprintf(p.w, "\r\033[K%s %s", spinnerFrames[p.frame], p.msg)
}

// wait sleeps d, turning the spinner on a terminal; it returns early when ctx ends.
func (p *progress) wait(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		step := min(left, 100*time.Millisecond)
		if !p.tty {
			step = left
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(step):
		}
		if p.tty {
			p.draw()
		}
	}
}

// done clears the spinner line, or ends the line of dots.
func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	} else if p.dots {
		fmt.Fprintln(p.w)
	}
	p.dots, p.msg = false, ""
}

// clientCmd marks a command as a client command (help group and CLI guide) and gives it --json.
func clientCmd(c *cobra.Command) *cobra.Command {
	c.GroupID = groupClient
	c.Flags().Bool("json", false, "print the server's JSON answer instead of text (for scripts)")
	return c
}

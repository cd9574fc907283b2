package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/media"
)

// Limits of POST /api/upload-ref on the wire; the size limit of each format is the core's (media.Kind.MaxSize).
const (
	// maxUploadBody bounds the whole multipart body: the largest format's limit plus room for the framing
	// and the small fields. The global JSON limit does not apply to this route.
	maxUploadBody = media.MaxVideoSize + 1<<20
	// uploadDeadline is the longest the body of one upload may take to arrive.
	uploadDeadline = 10 * time.Minute
	// uploadMinBytes must arrive in every uploadWindow (about 0.8 KiB/s), or the upload is cut off.
	uploadMinBytes = 16 << 10
	uploadWindow   = 20 * time.Second
)

// Paths of the upload endpoints, as the presign answer names them.
const (
	uploadPath = "/api/upload-ref"
	commitPath = "/api/upload-ref/commit"
)

// registerUploads adds the routes of uploads and direct-upload presign/commit.
func (s *Server) registerUploads(api *mux.Router) {
	api.HandleFunc("/upload-ref", s.authed(s.uploadRef)).Methods(http.MethodPost)
	api.HandleFunc("/upload-ref/presign", s.authed(s.presignUpload)).Methods(http.MethodPost)
	api.HandleFunc("/upload-ref/commit", s.authed(s.commitUpload)).Methods(http.MethodPost)
}

// uploadResponse is the answer of POST /api/upload-ref and of a commit.
type uploadResponse struct {
	OK        bool   `json:"ok"`
	URL       string `json:"url"`
	MediaType string `json:"media_type"`
	MIME      string `json:"mime"`
}

func uploadAnswer(u *models.Upload) uploadResponse {
	return uploadResponse{OK: true, URL: u.URL, MediaType: u.MediaType, MIME: u.MIME}
}

// uploadRef streams the multipart field `file` into the media store. `workspace_id` may come before or
// after `file`: before, the file is streamed straight into the workspace's folder; after, the stored
// file is moved there. Other fields are ignored.
func (s *Server) uploadRef(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	if err := s.svc.Uploads().MayUpload(id); err != nil {
		return err
	}
	body := newUploadBody(w, http.MaxBytesReader(w, r.Body, maxUploadBody))
	r.Body = body
	mr, err := r.MultipartReader()
	if err != nil {
		return models.Invalid("send the file as multipart/form-data in a field named file")
	}
	var (
		workspace     string
		seenWorkspace bool
		up            *models.Upload
	)
	// fail reports err and removes a file already stored by this request.
	fail := func(err error) error {
		if up != nil {
			if rerr := s.svc.Uploads().RemoveUpload(r.Context(), s.opts.Media, id, up.ID); rerr != nil {
				return rerr
			}
		}
		return body.explain(err, nil)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF { // exactly io.EOF: a body cut short wraps io.EOF in a multipart error
			break
		}
		if err != nil {
			return fail(err)
		}
		if err := checkPart(part.FormName(), part.FileName()); err != nil {
			return fail(err)
		}
		switch part.FormName() {
		case "workspace_id":
			if seenWorkspace {
				return fail(models.Invalid("send workspace_id once"))
			}
			seenWorkspace = true
			b, err := io.ReadAll(io.LimitReader(part, models.MaxWorkspaceIDLen+1))
			if err != nil {
				return fail(err)
			}
			if err := models.CheckWorkspaceID(string(b)); err != nil {
				return fail(err)
			}
			workspace = string(b)
			if up != nil {
				moved, err := s.svc.Uploads().MoveUploadToWorkspace(r.Context(), s.opts.Media, id, up, workspace)
				if err != nil {
					return fail(err)
				}
				up = moved
			}
		case "file":
			if up != nil {
				return fail(models.Invalid("send one file per request"))
			}
			file := &readRecorder{r: part}
			if up, err = s.svc.Uploads().UploadFile(r.Context(), s.opts.Media, id, workspace, file); err != nil {
				return body.explain(err, file.err)
			}
		}
	}
	if up == nil {
		return models.Invalid("missing file: send the file in a multipart field named file")
	}
	writeJSON(w, http.StatusOK, uploadAnswer(up))
	return nil
}

// presignResponse is the answer of POST /api/upload-ref/presign, in its direct or proxy shape.
type presignResponse struct {
	OK        bool           `json:"ok"`
	Strategy  string         `json:"strategy"`
	Reason    string         `json:"reason,omitempty"`
	Key       string         `json:"key,omitempty"`
	MediaType string         `json:"media_type,omitempty"`
	MIME      string         `json:"mime,omitempty"`
	Upload    *presignedPut  `json:"upload,omitempty"`
	Commit    *presignCommit `json:"commit,omitempty"`
	Fallback  pathRef        `json:"fallback"`
}

type presignedPut struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresIn int               `json:"expires_in"`
}

type presignCommit struct {
	Path string            `json:"path"`
	Body map[string]string `json:"body"`
}

type pathRef struct {
	Path string `json:"path"`
}

func (s *Server) presignUpload(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.PresignRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := s.svc.Uploads().PresignUpload(r.Context(), s.opts.Media, id, req)
	if err != nil {
		return err
	}
	out := presignResponse{OK: true, Strategy: p.Strategy, Reason: p.Reason, Fallback: pathRef{uploadPath}}
	if p.Strategy == models.StrategyDirect {
		out.Key, out.MediaType, out.MIME = p.Key, string(p.Kind.Type), p.Kind.MIME
		out.Upload = &presignedPut{Method: http.MethodPut, URL: p.URL, Headers: p.Headers, ExpiresIn: int(p.ExpiresIn.Seconds())}
		out.Commit = &presignCommit{Path: commitPath, Body: map[string]string{"key": p.Key}}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) commitUpload(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req struct {
		Key string `json:"key"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	up, err := s.svc.Uploads().CommitUpload(r.Context(), s.opts.Media, id, req.Key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, uploadAnswer(up))
	return nil
}

// uploadBody reads a request body under a deadline and a minimum data rate, using the connection's read
// deadline (http.ResponseController): the whole body must arrive within uploadDeadline, and at least
// uploadMinBytes in every uploadWindow. It remembers the first read error so that a failure of the
// client can be told apart from one of the server.
type uploadBody struct {
	readRecorder
	io.Closer
	rc     *http.ResponseController
	end    time.Time
	window int64
}

func newUploadBody(w http.ResponseWriter, r io.ReadCloser) *uploadBody {
	now := time.Now()
	b := &uploadBody{readRecorder: readRecorder{r: r}, Closer: r, rc: http.NewResponseController(w), end: now.Add(uploadDeadline)}
	b.extend(now)
	return b
}

// extend starts a new window; a writer without deadlines (some test recorders) simply has none.
func (b *uploadBody) extend(now time.Time) {
	b.window = 0
	deadline := now.Add(uploadWindow)
	if deadline.After(b.end) {
		deadline = b.end
	}
	_ = b.rc.SetReadDeadline(deadline)
}

func (b *uploadBody) Read(p []byte) (int, error) {
	n, err := b.readRecorder.Read(p)
	if b.window += int64(n); b.window >= uploadMinBytes {
		b.extend(time.Now())
	}
	return n, err
}

// explain turns a failure caused by the client's body into the client's error: too large, too slow,
// cut short, or malformed (partErr is the read error of the file part, if any). The core's own
// errors pass through.
func (b *uploadBody) explain(err, partErr error) error {
	var mbe *http.MaxBytesError
	switch {
	case b.err == nil && partErr != nil:
		return &models.Error{Kind: models.KindInvalid, Err: partErr, Message: "malformed multipart body: the file part is cut short (no closing boundary)"}
	case b.err == nil:
		var e *models.Error
		if errors.As(err, &e) {
			return err
		}
		// Neither a read failure nor the core's refusal: the multipart framing itself is malformed.
		return &models.Error{Kind: models.KindInvalid, Err: err, Message: "malformed multipart body: " + err.Error()}
	case errors.As(b.err, &mbe):
		return &models.Error{Kind: models.KindTooLarge, Err: b.err, Message: fmt.Sprintf(
			"request body too large: at most %d bytes (the largest file, a video, may be %d MB)", maxUploadBody, media.MaxVideoSize>>20)}
	case errors.Is(b.err, os.ErrDeadlineExceeded):
		return &models.Error{Kind: models.KindInvalid, Err: b.err, Message: fmt.Sprintf(
			"upload too slow: the body must arrive within %d minutes, at least %d KiB every %d seconds",
			int(uploadDeadline.Minutes()), uploadMinBytes>>10, int(uploadWindow.Seconds()))}
	}
	return &models.Error{Kind: models.KindInvalid, Err: b.err, Message: "the upload was interrupted before the end of the body"}
}

// readRecorder remembers the first error other than io.EOF that its reader returned.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && err != io.EOF && rr.err == nil {
		rr.err = err
	}
	return n, err
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	restclient "studio/rest/client"
)

// uploadResult is the answer of POST /api/upload-ref and of its commit, plus how the file went.
type uploadResult struct {
	OK        bool   `json:"ok"`
	URL       string `json:"url"`
	MediaType string `json:"media_type"`
	MIME      string `json:"mime"`
	// Via is "direct" (PUT to the media store, then commit) or "proxy" (posted through the server).
	Via string `json:"via"`
}

// presignAnswer is the answer of POST /api/upload-ref/presign (both strategies).
type presignAnswer struct {
	Strategy string `json:"strategy"`
	Reason   string `json:"reason"`
	Key      string `json:"key"`
	Upload   struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"upload"`
	Commit struct {
		Body json.RawMessage `json:"body"`
	} `json:"commit"`
}

func newUploadCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:   "upload FILE",
		Short: "upload an image, audio or video file and print its public link",
		Long: "Upload a file and print its public link, usable as a reference in generate and video.\n" +
			"The client asks for a direct upload to the media store first and PUTs the file there when\n" +
			"offered; on any failure of that path it posts the file through the server instead.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			if err := c.needCredential(); err != nil {
				return err
			}
			ws, _ := cmd.Flags().GetString("workspace")
			res, err := c.upload(cmd.Context(), args[0], ws)
			if err != nil {
				return err
			}
			if c.asJSON {
				raw, _ := json.Marshal(res)
				return c.printJSON(raw)
			}
			c.printf("%s\n", res.URL)
			return nil
		},
	})
	cmd.Flags().String("workspace", "", "workspace id: the file goes to that workspace's subfolder")
	return cmd
}

// upload sends a local file: presign, then a direct PUT with exactly the returned headers and a commit,
// or, when the server says proxy or anything on the direct path fails, a streamed multipart post.
func (c *client) upload(ctx context.Context, path, workspace string) (*uploadResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("%s is not a regular file", path)}
	}
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	body := restclient.PresignUploadJSONRequestBody{Ext: restclient.PresignUploadJSONBodyExt(ext), Size: int(fi.Size())}
	if workspace != "" {
		body.WorkspaceId = &workspace
	}
	var pre presignAnswer
	_, err = c.do(ctx, &pre, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
		return api.PresignUpload(ctx, body)
	})
	switch {
	case err != nil:
		fmt.Fprintf(c.errw, "direct upload not available (%v); uploading through the server\n", err)
	case pre.Strategy == "direct":
		res, derr := c.uploadDirect(ctx, f, fi.Size(), &pre)
		if derr == nil {
			return res, nil
		}
		fmt.Fprintf(c.errw, "direct upload failed (%v); uploading through the server\n", derr)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return c.uploadProxy(ctx, f, filepath.Base(path), workspace)
}

// uploadDirect PUTs the file to the presigned URL with exactly the returned headers, then commits it.
func (c *client) uploadDirect(ctx context.Context, f *os.File, size int64, pre *presignAnswer) (*uploadResult, error) {
	if pre.Upload.Method != "" && pre.Upload.Method != http.MethodPut {
		return nil, fmt.Errorf("unsupported upload method %s", pre.Upload.Method)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, pre.Upload.URL, io.NopCloser(f))
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	for k, v := range pre.Upload.Headers {
		if strings.EqualFold(k, "Content-Length") {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n != size {
				return nil, fmt.Errorf("presigned Content-Length %q does not match the file's %d bytes", v, size)
			}
			continue // sent from req.ContentLength
		}
		req.Header.Set(k, v)
	}
	// The media store gets no credential of ours: the URL carries its own signature.
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("the media store answered %s", res.Status)
	}
	var commit any = pre.Commit.Body
	if len(pre.Commit.Body) == 0 {
		commit = restclient.CommitUploadJSONRequestBody{Key: pre.Key}
	}
	var out uploadResult
	if _, err := c.do(ctx, &out, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
		return api.CommitUploadWithBody(ctx, "application/json", jsonBody(commit))
	}); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	out.Via = "direct"
	return &out, nil
}

// uploadProxy posts the file as multipart (POST /api/upload-ref), streamed from disk rather than read into memory.
func (c *client) uploadProxy(ctx context.Context, f io.Reader, name, workspace string) (*uploadResult, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			if workspace != "" {
				if err := mw.WriteField("workspace_id", workspace); err != nil {
					return err
				}
			}
			part, err := mw.CreateFormFile("file", name)
			if err != nil {
				return err
			}
			if _, err := io.Copy(part, f); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	var out uploadResult
	_, err := c.doUnbounded(ctx, &out, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
		return api.UploadRefWithBody(ctx, mw.FormDataContentType(), pr)
	})
	pr.Close()
	if err != nil {
		return nil, err
	}
	out.Via = "proxy"
	return &out, nil
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	restclient "studio/rest/client"
)

// jobView is the answer of GET /api/jobs?id= (and one row of the listing).
type jobView struct {
	JobID     string    `json:"jobId"`
	Status    string    `json:"status"`
	Progress  string    `json:"progress"`
	CDNURL    string    `json:"cdn_url"`
	Error     *string   `json:"error"`
	CreatedAt time.Time `json:"created_at"`
}

// videoView is the answer of POST /api/videos and GET /api/videos?id=.
type videoView struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Model      string  `json:"model"`
	Resolution string  `json:"resolution"`
	Duration   int     `json:"duration"`
	Credits    int64   `json:"credits"`
	Progress   int     `json:"progress"`
	VideoURL   string  `json:"video_url"`
	Error      *string `json:"error"`
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// usageError is a wrong invocation: exit code 1.
func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// references turns each FILE or URL into a public link, uploading the files.
func (c *client) references(ctx context.Context, refs []string) ([]string, error) {
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		if strings.HasPrefix(ref, "http://") || strings.HasPrefix(ref, "https://") {
			out = append(out, ref)
			continue
		}
		res, err := c.upload(ctx, ref, "")
		if err != nil {
			return nil, fmt.Errorf("upload %s: %w", ref, err)
		}
		fmt.Fprintf(c.errw, "uploaded %s: %s\n", ref, res.URL)
		out = append(out, res.URL)
	}
	return out, nil
}

// pollDelay is the wait before the n-th poll of a job: 0.5 s growing to at most 3 s.
func pollDelay(n int) time.Duration {
	d := 500 * time.Millisecond
	for i := 0; i < n && d < 3*time.Second; i++ {
		d = d * 3 / 2
	}
	return min(d, 3*time.Second)
}

func newGenerateCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:   "generate",
		Short: "generate an image from a prompt or a template, wait for it and optionally download it",
		Example: "  studio generate --prompt 'a red fox in the snow' --ratio 3:4 -o fox.png\n" +
			"  studio generate --template poster --input title=Sale --input color=red --reference ./logo.png",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			fl := cmd.Flags()
			prompt, _ := fl.GetString("prompt")
			tpl, _ := fl.GetString("template")
			inputs, _ := fl.GetStringArray("input")
			refs, _ := fl.GetStringArray("reference")
			noWait, _ := fl.GetBool("no-wait")
			output, _ := fl.GetString("output")
			if (prompt == "") == (tpl == "") {
				return usageError("give exactly one of --prompt and --template")
			}
			if len(inputs) > 0 && tpl == "" {
				return usageError("--input needs --template")
			}
			if noWait && output != "" {
				return usageError("-o needs to wait for the result: drop --no-wait")
			}
			if err := checkOutputName(output, imageExts); err != nil {
				return err
			}
			if err := c.needCredential(); err != nil {
				return err
			}
			var body restclient.GenerateRequest
			if prompt != "" {
				body.Prompt = &prompt
			} else {
				if uuidRE.MatchString(tpl) {
					body.TemplateId = &tpl
				} else {
					body.TemplateSlug = &tpl
				}
				in := map[string]string{}
				for _, kv := range inputs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usageError("--input %q: want key=value", kv)
					}
					in[k] = v
				}
				body.Input = in
			}
			body.Ratio, body.Model = flagString(fl, "ratio"), flagString(fl, "model")
			body.Quality = (*restclient.GenerateRequestQuality)(flagString(fl, "quality"))
			body.Background = (*restclient.GenerateRequestBackground)(flagString(fl, "background"))
			body.Resolution = (*restclient.GenerateRequestResolution)(flagString(fl, "resolution"))
			ctx := cmd.Context()
			if len(refs) > 0 {
				urls, err := c.references(ctx, refs)
				if err != nil {
					return err
				}
				body.ReferenceImages = &urls
			}
			var sub struct {
				JobID  string `json:"jobId"`
				Status string `json:"status"`
			}
			raw, err := c.do(ctx, &sub, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.GenerateImage(ctx, nil, body)
			})
			if err != nil {
				return err
			}
			if noWait {
				if c.asJSON {
					return c.printJSON(raw)
				}
				c.printf("%s\n", sub.JobID)
				return nil
			}
			job, raw, err := c.waitJob(ctx, sub.JobID)
			if err != nil {
				return err
			}
			return c.finish(ctx, raw, job.Status == "done", job.CDNURL, output, job.Error, "job "+job.JobID)
		},
	})
	fl := cmd.Flags()
	fl.String("prompt", "", "the complete prompt")
	fl.String("template", "", "image template id or slug (instead of --prompt)")
	fl.StringArray("input", nil, "template field value as key=value (repeatable)")
	fl.String("ratio", "", "aspect ratio W:H, e.g. 3:4, 1:1, 16:9")
	fl.String("quality", "", "low, medium or high (default high)")
	fl.String("background", "", "transparent or opaque")
	fl.String("resolution", "", "1k (default), 2k or 4k; 2k and 4k cost 2 credits")
	fl.String("model", "", "auto, a model family or a channel name")
	fl.StringArray("reference", nil, "reference image: a FILE (uploaded first) or a URL (repeatable)")
	fl.Bool("no-wait", false, "print the job id and return at once")
	fl.StringP("output", "o", "", "download the result to this FILE")
	return cmd
}

// localTime shows a time in the local zone, naming it (e.g. 2026-01-02 15:04:05 UTC+08:00).
func localTime(t time.Time) string {
	return t.Local().Format("2006-01-02 15:04:05 UTC-07:00")
}

// waitJob polls GET /api/jobs?id= until the job ends, showing its progress.
func (c *client) waitJob(ctx context.Context, id string) (*jobView, []byte, error) {
	p := newProgress(c.errw)
	defer p.done()
	for n := 0; ; n++ {
		if err := p.wait(ctx, pollDelay(n)); err != nil {
			return nil, nil, err
		}
		var j jobView
		raw, err := c.getJob(ctx, id, &j)
		if err != nil {
			return nil, nil, err
		}
		if j.Status == "done" || j.Status == "failed" {
			return &j, raw, nil
		}
		msg := "Generating"
		if j.Progress != "" {
			msg += ": " + j.Progress
		}
		p.status(msg)
	}
}

// finish reports a finished job or task: its link (downloaded with -o), or its error with exit code 5.
func (c *client) finish(ctx context.Context, raw []byte, ok bool, link, output string, failure *string, what string) error {
	if !ok {
		if c.asJSON {
			_ = c.printJSON(raw)
		}
		reason := "no reason given"
		if failure != nil && *failure != "" {
			reason = *failure
		}
		return &exitError{code: exitJobFailed, err: fmt.Errorf("%s failed: %s", what, reason)}
	}
	if output != "" {
		if err := c.download(ctx, link, output); err != nil {
			return err
		}
	}
	if c.asJSON {
		return c.printJSON(raw)
	}
	c.printf("%s\n", link)
	if output != "" {
		fmt.Fprintf(c.errw, "saved %s\n", output)
	}
	return nil
}

func newJobsCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:   "jobs",
		Short: "list your image jobs, or show one with --id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.needCredential(); err != nil {
				return err
			}
			fl := cmd.Flags()
			id, _ := fl.GetString("id")
			ctx := cmd.Context()
			if id != "" {
				var j jobView
				raw, err := c.getJob(ctx, id, &j)
				if err != nil {
					return err
				}
				if c.asJSON {
					return c.printJSON(raw)
				}
				c.printJobs([]jobView{j})
				return nil
			}
			params := restclient.GetJobsParams{Status: (*restclient.GetJobsParamsStatus)(flagString(fl, "status")), Cursor: flagString(fl, "cursor")}
			if n, _ := fl.GetInt("limit"); n > 0 {
				params.Limit = &n
			}
			var page struct {
				Jobs       []jobView `json:"jobs"`
				NextCursor *string   `json:"next_cursor"`
			}
			raw, err := c.do(ctx, &page, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.GetJobs(ctx, &params)
			})
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(raw)
			}
			c.printJobs(page.Jobs)
			if page.NextCursor != nil {
				fmt.Fprintf(c.errw, "more: studio jobs --cursor %s\n", *page.NextCursor)
			}
			return nil
		},
	})
	fl := cmd.Flags()
	fl.String("id", "", "show this job")
	fl.String("status", "", "only jobs in this status: pending, done or failed")
	fl.Int("limit", 20, "jobs per page (at most 100)")
	fl.String("cursor", "", "continue a listing from its next_cursor")
	return cmd
}

func (c *client) printJobs(jobs []jobView) {
	tw := newTable(c.out)
	fmt.Fprintln(tw, "JOB\tSTATUS\tCREATED\tRESULT")
	for _, j := range jobs {
		result := j.CDNURL
		if j.Error != nil {
			result = *j.Error
		} else if result == "" {
			result = j.Progress
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.JobID, j.Status, localTime(j.CreatedAt), result)
	}
	tw.Flush()
}

func newTemplatesCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:   "templates",
		Short: "list the image and copy templates you can use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.needCredential(); err != nil {
				return err
			}
			fl := cmd.Flags()
			params := restclient.ListTemplatesParams{Type: (*restclient.ListTemplatesParamsType)(flagString(fl, "type")),
				Source: (*restclient.ListTemplatesParamsSource)(flagString(fl, "source"))}
			var list struct {
				Templates []struct {
					ID     string `json:"id"`
					Type   string `json:"type"`
					Slug   string `json:"slug"`
					ZhName string `json:"zh_name"`
					Source string `json:"source"`
				} `json:"templates"`
			}
			raw, err := c.do(cmd.Context(), &list, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.ListTemplates(ctx, &params)
			})
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(raw)
			}
			tw := newTable(c.out)
			fmt.Fprintln(tw, "ID\tTYPE\tSLUG\tNAME\tSOURCE")
			for _, t := range list.Templates {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Type, t.Slug, t.ZhName, t.Source)
			}
			return tw.Flush()
		},
	})
	cmd.Flags().String("type", "", "image or article")
	cmd.Flags().String("source", "", "only templates of this source, e.g. mine")
	return cmd
}

func newVideoCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:     "video",
		Short:   "generate a video from a prompt, wait for it and optionally download it",
		Example: "  studio video --prompt 'waves at dusk' --duration 5 --resolution 720p -o waves.mp4",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			fl := cmd.Flags()
			prompt, _ := fl.GetString("prompt")
			noWait, _ := fl.GetBool("no-wait")
			output, _ := fl.GetString("output")
			images, _ := fl.GetStringArray("image")
			if prompt == "" {
				return usageError("--prompt is required")
			}
			if noWait && output != "" {
				return usageError("-o needs to wait for the result: drop --no-wait")
			}
			if err := checkOutputName(output, videoExts); err != nil {
				return err
			}
			if err := c.needCredential(); err != nil {
				return err
			}
			body := restclient.VideoRequest{Prompt: &prompt, Model: flagString(fl, "model"), Ratio: flagString(fl, "ratio"),
				Resolution: (*restclient.VideoRequestResolution)(flagString(fl, "resolution"))}
			if fl.Changed("duration") {
				d, _ := fl.GetFloat64("duration")
				d32 := float32(d)
				body.Duration = &d32
			}
			ctx := cmd.Context()
			if len(images) > 0 {
				urls, err := c.references(ctx, images)
				if err != nil {
					return err
				}
				body.Images = &urls
			}
			var v videoView
			raw, err := c.do(ctx, &v, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.CreateVideo(ctx, nil, body)
			})
			if err != nil {
				return err
			}
			if noWait {
				if c.asJSON {
					return c.printJSON(raw)
				}
				c.printf("%s\n", v.ID)
				return nil
			}
			fmt.Fprintf(c.errw, "video %s: %s, %s, %d s, %d credits\n", v.ID, v.Model, v.Resolution, v.Duration, v.Credits)
			p := newProgress(c.errw)
			for n := 0; ; n++ {
				if err := p.wait(ctx, pollDelay(n)); err != nil {
					p.done()
					return err
				}
				id := v.ID
				raw, err = c.do(ctx, &v, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
					return api.GetVideos(ctx, &restclient.GetVideosParams{Id: &id})
				})
				if err != nil {
					p.done()
					return err
				}
				if v.Status == "done" || v.Status == "failed" || v.Status == "cancelled" {
					break
				}
				p.status(fmt.Sprintf("Generating video: %s %d%%", v.Status, v.Progress))
			}
			p.done()
			if v.Status == "cancelled" && v.Error == nil {
				msg := "cancelled"
				v.Error = &msg
			}
			return c.finish(ctx, raw, v.Status == "done", v.VideoURL, output, v.Error, "video "+v.ID)
		},
	})
	fl := cmd.Flags()
	fl.String("prompt", "", "the prompt")
	fl.String("model", "", "tier code or auto (default: the service picks a tier that fits)")
	fl.Float64("duration", 0, "seconds; must fit the tier's range")
	fl.String("resolution", "", "480p, 720p, 1080p, 768P or 2K")
	fl.String("ratio", "", "aspect ratio, e.g. 16:9")
	fl.StringArray("image", nil, "first frame, first+last frame or appearance reference: FILE or URL (repeatable)")
	fl.Bool("no-wait", false, "print the task id and return at once")
	fl.StringP("output", "o", "", "download the video to this FILE")
	return cmd
}

// getJob reads one job (GET /api/jobs?id=) into j.
func (c *client) getJob(ctx context.Context, id string, j *jobView) ([]byte, error) {
	return c.do(ctx, j, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
		return api.GetJobs(ctx, &restclient.GetJobsParams{Id: &id})
	})
}

// flagString returns a string flag's value, nil when it is empty (the generated client leaves the field out).
func flagString(fl *pflag.FlagSet, name string) *string {
	if v, _ := fl.GetString(name); v != "" {
		return &v
	}
	return nil
}

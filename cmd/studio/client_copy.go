package main

import (
	"context"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	restclient "studio/rest/client"
)

// newCopyCmd writes copy from a copy template (POST /api/article) and prints it.
func newCopyCmd() *cobra.Command {
	cmd := clientCmd(&cobra.Command{
		Use:   "copy",
		Short: "write copy (title, body, hashtags) from a copy template",
		Long: "Write copy from a copy template (`studio templates --type article` lists them): a form template takes\n" +
			"its fields with --input key=value, a spec template one sentence with --description.",
		Example: "  studio copy --template tea-note --input shop='Lu Yu Tea'\n" +
			"  studio copy --template launch-post --description 'a thermos that keeps tea hot for 12 hours'",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			fl := cmd.Flags()
			tpl, _ := fl.GetString("template")
			inputs, _ := fl.GetStringArray("input")
			desc, _ := fl.GetString("description")
			if tpl == "" {
				return usageError("--template is required: the slug of a copy template (studio templates --type article)")
			}
			if len(inputs) > 0 && desc != "" {
				return usageError("give --input (a form template) or --description (a spec template), not both")
			}
			if err := c.needCredential(); err != nil {
				return err
			}
			body := restclient.GenerateArticleJSONRequestBody{TemplateSlug: tpl}
			if desc != "" {
				body.Input = desc
			} else {
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
			var art struct {
				Title    string   `json:"title"`
				Body     string   `json:"body"`
				Hashtags []string `json:"hashtags"`
			}
			raw, err := c.do(cmd.Context(), &art, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.GenerateArticle(ctx, body)
			})
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(raw)
			}
			c.printf("%s\n\n%s\n", art.Title, art.Body)
			if len(art.Hashtags) > 0 {
				c.printf("\n#%s\n", strings.Join(art.Hashtags, " #"))
			}
			return nil
		},
	})
	fl := cmd.Flags()
	fl.String("template", "", "copy template slug")
	fl.StringArray("input", nil, "template field value as key=value (repeatable)")
	fl.String("description", "", "one sentence, for a spec template")
	return cmd
}

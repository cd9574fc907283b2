package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	restclient "studio/rest/client"
)

// deviceStart is the answer of POST /api/auth/device.
type deviceStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// deviceToken is the successful answer of POST /api/auth/device/token.
type deviceToken struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// whoami is the answer of GET /api/whoami.
type whoami struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
	Credits  int64  `json:"credits"`
	// CallbackSecret verifies the signatures of this person's job callbacks.
	CallbackSecret string `json:"callback_secret"`
}

func newLoginCmd() *cobra.Command {
	return clientCmd(&cobra.Command{
		Use:   "login",
		Short: "sign in with your personal account (device authorization: approve the shown code in a browser)",
		Long: "Sign in with your personal account. studio shows a code and a link; open the link, sign in, check\n" +
			"the code and approve. The login (valid 7 days) is stored in the user configuration directory\n" +
			"(studio/credentials.json, readable by you only) and used by the other commands unless\n" +
			"SERVICE_API_KEY is set.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			c.cred = "" // the device flow needs no credential; never send an old one
			ctx := cmd.Context()
			var start deviceStart
			if _, err := c.do(ctx, &start, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.StartDeviceLogin(ctx)
			}); err != nil {
				return err
			}
			fmt.Fprintf(c.errw, "To sign in, open\n\n    %s\n\nand check that it shows the code\n\n    %s\n\n(or open %s and enter the code)\n\n",
				start.VerificationURIComplete, start.UserCode, start.VerificationURI)
			interval := time.Duration(max(start.Interval, 1)) * time.Second
			deadline := time.Now().Add(time.Duration(start.ExpiresIn) * time.Second)
			p := newProgress(c.errw)
			defer p.done()
			for {
				p.status("Waiting for approval")
				if err := p.wait(ctx, interval); err != nil {
					return err
				}
				var tok deviceToken
				grant := "urn:ietf:params:oauth:grant-type:device_code"
				_, err := c.do(ctx, &tok, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
					return api.PollDeviceToken(ctx, restclient.PollDeviceTokenJSONRequestBody{GrantType: &grant, DeviceCode: start.DeviceCode})
				})
				var ae *apiError
				switch {
				case err == nil:
					p.done()
					return c.finishLogin(cmd, tok)
				case errors.As(err, &ae) && ae.Status == 400 && ae.Message == "authorization_pending":
				case errors.As(err, &ae) && ae.Status == 400 && ae.Message == "slow_down":
					interval += 5 * time.Second
				case errors.As(err, &ae) && ae.Status == 400 && ae.Message == "access_denied":
					return &exitError{code: exitAuth, err: errors.New("the sign-in was denied in the browser")}
				case errors.As(err, &ae) && ae.Status == 400 && (ae.Message == "expired_token" || ae.Message == "invalid_grant"):
					return &exitError{code: exitAuth, err: errors.New("the code expired before it was approved: run `studio login` again")}
				default:
					return err
				}
				if time.Now().After(deadline) {
					return &exitError{code: exitAuth, err: errors.New("the code expired before it was approved: run `studio login` again")}
				}
			}
		},
	})
}

// finishLogin stores the token and says who is signed in.
func (c *client) finishLogin(cmd *cobra.Command, tok deviceToken) error {
	c.cred = tok.AccessToken
	var me whoami
	raw, err := c.do(cmd.Context(), &me, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
		return api.Whoami(ctx)
	})
	if err != nil {
		return err
	}
	creds := &credentials{BaseURL: c.base, Token: tok.AccessToken, ExpiresAt: time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second).UTC().Truncate(time.Second), Email: me.Email}
	path, err := saveCredentials(creds)
	if err != nil {
		return fmt.Errorf("signed in, but the login could not be stored: %w", err)
	}
	if c.asJSON {
		return c.printJSON(raw)
	}
	c.printf("Signed in to %s as %s (until %s). Login stored in %s\n", c.base, me.Email, localTime(creds.ExpiresAt), path)
	return nil
}

func newLogoutCmd() *cobra.Command {
	return clientCmd(&cobra.Command{
		Use:   "logout",
		Short: "forget the stored login",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			path, err := credentialsPath()
			if err != nil {
				return err
			}
			err = os.Remove(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if c.asJSON {
				return c.printJSON([]byte(fmt.Sprintf(`{"ok":true,"removed":%t}`, err == nil)))
			}
			if err != nil {
				c.printf("Not signed in.\n")
				return nil
			}
			c.printf("Signed out (removed %s).\n", path)
			return nil
		},
	})
}

func newWhoamiCmd() *cobra.Command {
	return clientCmd(&cobra.Command{
		Use:   "whoami",
		Short: "show the personal account you are signed in with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.needCredential(); err != nil {
				return err
			}
			var me whoami
			raw, err := c.do(cmd.Context(), &me, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.Whoami(ctx)
			})
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(raw)
			}
			c.printf("%s (%s), %d credits, at %s\n", me.Email, me.Nickname, me.Credits, c.base)
			c.printf("callback signing secret: %s\n", me.CallbackSecret)
			return nil
		},
	})
}

func newBalanceCmd() *cobra.Command {
	return clientCmd(&cobra.Command{
		Use:   "balance",
		Short: "show the credits you can spend",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.needCredential(); err != nil {
				return err
			}
			var b struct {
				Credits  int64  `json:"credits"`
				Identity string `json:"identity"`
			}
			raw, err := c.do(cmd.Context(), &b, func(ctx context.Context, api *restclient.Client) (*http.Response, error) {
				return api.GetBalance(ctx)
			})
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(raw)
			}
			c.printf("%d credits\n", b.Credits)
			return nil
		},
	})
}

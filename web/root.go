package web

import "net/http"

// root answers GET / with a redirect to the console's sign-in page, where a newcomer starts.
func (c *Console) root(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/login", http.StatusFound)
}

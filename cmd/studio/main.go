// Command studio is the one binary of the service: `studio serve` runs the server, `studio admin ...`
// runs platform administration against the database, and the client commands talk to a server over HTTP.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "studio:", err)
		os.Exit(exitCode(err))
	}
}

package main

import (
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// GuideFlag is one flag of a command in the CLI guide.
type GuideFlag struct {
	Name    string `json:"name"`
	Usage   string `json:"usage"`
	Default string `json:"default,omitempty"`
}

// GuideCommand is one command of the CLI guide.
type GuideCommand struct {
	Name    string      `json:"name"`
	Usage   string      `json:"usage"`
	Summary string      `json:"summary"`
	Flags   []GuideFlag `json:"flags,omitempty"`
}

// GuideExitCode is one exit code of the client commands.
type GuideExitCode struct {
	Code    int    `json:"code"`
	Meaning string `json:"meaning"`
}

// Guide is the answer of GET /api/cli-guide, derived from the real command tree: Commands are the client
// commands (group "client"), ServerCommands the commands that run the server itself (`serve`, `admin`).
type Guide struct {
	Package        string          `json:"package"`
	Command        string          `json:"command"`
	Version        string          `json:"version"`
	Install        string          `json:"install"`
	Environment    []string        `json:"environment"`
	Credentials    string          `json:"credentials"`
	Commands       []GuideCommand  `json:"commands"`
	ServerCommands []GuideCommand  `json:"server_commands"`
	ExitCodes      []GuideExitCode `json:"exit_codes"`
}

// cliGuide walks the command tree and lists every client command and every server command with its flags.
func cliGuide(root *cobra.Command) Guide {
	g := Guide{
		Package: "studio/cmd/studio",
		Command: root.Name(),
		Version: version,
		Install: "go build -o studio ./cmd/studio (in a checkout of the studio module), or copy the studio binary " +
			"of your server's release: the client and the server are the same binary",
		Environment:    []string{"SERVICE_BASE_URL", "SERVICE_API_KEY"},
		Credentials:    "`studio login` stores a 7-day personal login in <user config dir>/studio/credentials.json (mode 0600); SERVICE_API_KEY wins over it",
		Commands:       []GuideCommand{},
		ServerCommands: []GuideCommand{},
		ExitCodes:      exitCodes,
	}
	for _, c := range root.Commands() {
		if c.Hidden || !c.IsAvailableCommand() {
			continue
		}
		gc := GuideCommand{Name: c.Name(), Usage: root.Name() + " " + c.Use, Summary: c.Short}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			gc.Flags = append(gc.Flags, GuideFlag{Name: "--" + f.Name, Usage: f.Usage, Default: f.DefValue})
		})
		switch c.GroupID {
		case groupClient:
			if c.Name() != "help" && c.Name() != "completion" {
				g.Commands = append(g.Commands, gc)
			}
		case groupServer:
			g.ServerCommands = append(g.ServerCommands, gc)
		}
	}
	byName := func(cs []GuideCommand) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	}
	byName(g.Commands)
	byName(g.ServerCommands)
	return g
}

package main

import (
	"sort"
	"strings"

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

// Guide is the answer of GET /api/cli-guide, derived from the real command tree.
type Guide struct {
	Package     string         `json:"package"`
	Command     string         `json:"command"`
	Version     string         `json:"version"`
	Install     string         `json:"install"`
	Environment []string       `json:"environment"`
	Commands    []GuideCommand `json:"commands"`
}

// cliGuide walks the command tree and lists every command with its flags.
func cliGuide(root *cobra.Command) Guide {
	g := Guide{
		Package:     "studio/cmd/studio",
		Command:     root.Name(),
		Version:     version,
		Install:     "go install studio/cmd/studio@latest (or download the studio binary of your server's release)",
		Environment: []string{"SERVICE_BASE_URL", "SERVICE_API_KEY"},
	}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		gc := GuideCommand{Name: c.Name(), Usage: root.Name() + " " + c.Use, Summary: c.Short}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			gc.Flags = append(gc.Flags, GuideFlag{Name: "--" + f.Name, Usage: f.Usage, Default: f.DefValue})
		})
		g.Commands = append(g.Commands, gc)
	}
	sort.Slice(g.Commands, func(i, j int) bool { return strings.Compare(g.Commands[i].Name, g.Commands[j].Name) < 0 })
	if g.Commands == nil {
		g.Commands = []GuideCommand{}
	}
	return g
}

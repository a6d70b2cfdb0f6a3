package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"spookat/schema"
)

// stdout receives help text asked for (-h, help): it is the answer, not a diagnostic.
var stdout io.Writer = os.Stdout

// command is one subcommand: words as typed after `edge`, a synopsis of its required flags
// and a one-line summary for `edge help`.
type command struct {
	words, synopsis, summary string
	run                      func(args []string) error
}

// commands lists every subcommand (a function: help refers to the list, and the list to help).
func commands() []command {
	role := func(r schema.Role) func([]string) error {
		return func(args []string) error { return credsIssue(r, args) }
	}
	return []command{
		{"site add", "-name N -origin URL [flags]", "add a site, print its key", siteAdd},
		{"site list", "[-json]", "list sites with their origins and delivery targets", siteList},
		{"visitor export", "-site KEY (-email E | -user U | -visitor N) -out FILE", "write what a site holds about one person to a .tar.gz", visitorExport},
		{"visitor erase", "-site KEY (-email E | -user U | -visitor N) -yes", "delete what a site holds about one person, to the bytes", visitorErase},
		{"site retention", "-site KEY -days N", "delete a site's conversations N days after their last message (0: keep)", siteRetention},
		{"site member add", "-site KEY -email E [-role owner|agent]", "make an existing operator a member of a site (owner by default)", func(a []string) error { return siteMember(true, a) }},
		{"site member remove", "-site KEY -email E", "end a membership; the operator's live inbox sockets close", func(a []string) error { return siteMember(false, a) }},
		{"operator add", "-email E -site KEY -password-stdin", "add an operator (an existing email is refused)", operatorAdd},
		{"operator list", "[-json]", "list operators with their sites, sessions and API tokens", operatorList},
		{"operator passwd", "-email E -password-stdin", "set a new password; revokes every session and API token of theirs", operatorPasswd},
		{"operator remove", "-email E", "delete an operator with their sessions, API tokens and memberships", operatorRemove},
		{"seed", "-sites N", "create N test sites (load tests)", seed},
		{"demo", "", "create the demo site and operator, print the URLs", demo},
		{"creds worker", "-id ID -out FILE", "NATS credentials of one worker", role(schema.RoleWorker)},
		{"creds ops", "-out FILE", "read-only NATS credentials for an SRE's nats CLI", role(schema.RoleOps)},
		{"creds edge", "[-expires 1h] -out FILE", "the edge's own NATS credentials (external NATS, one-off replays)", role(schema.RoleEdge)},
		{"creds list", "[-json]", "every NATS credential issued, and which are revoked", credsList},
		{"creds revoke", "-key U… | -id ID", "revoke one NATS credential, or every one of a worker", credsRevoke},
		{"backup", "-out FILE", "one archive of the database, attachments and keys, while the edge serves", backupCmd},
		{"restore", "-from FILE -data DIR", "make a data directory from a backup (never under a running edge)", restoreCmd},
		{"audit", "[-site KEY] [-action A] [-since DATE]", "the audit log: the installation's, or one site's (newest first)", auditCmd},
		{"nats-config", "-out FILE", "what a NATS cluster needs to trust this edge", natsConfig},
		{"help", "[command]", "this list, or one command's flags", help},
	}
}

// dispatch runs the subcommand args name, or serve when args start with a flag (or are empty).
func dispatch(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serve(args)
	}
	if c, rest := lookup(args); c != nil {
		return c.run(rest)
	}
	for n := min(len(args), 2); n > 0; n-- {
		prefix := strings.Join(args[:n], " ")
		group := groupOf(prefix)
		if group == "" {
			continue
		}
		if n == len(args) {
			return fmt.Errorf("'edge %s' needs a command:\n%s", prefix, group)
		}
		return fmt.Errorf("unknown command 'edge %s %s'; the %s commands are:\n%s", prefix, args[n], prefix, group)
	}
	return fmt.Errorf("unknown command %q; run 'edge help' for the list (serving takes flags only, e.g. edge -addr :8080)", args[0])
}

// lookup finds the command whose words start args (the longest such), and the rest of args.
func lookup(args []string) (*command, []string) {
	var best *command
	n := 0
	for _, c := range commands() {
		w := strings.Fields(c.words)
		if len(w) > n && len(w) <= len(args) && strings.Join(args[:len(w)], " ") == c.words {
			c := c
			best, n = &c, len(w)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[n:]
}

// groupOf lists the commands that start with word ("site", "operator", "creds"), or "".
func groupOf(word string) string {
	var b strings.Builder
	for _, c := range commands() {
		if strings.HasPrefix(c.words, word+" ") {
			fmt.Fprintf(&b, "  edge %-40s %s\n", c.words+" "+c.synopsis, c.summary)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// help prints the command list and serve's flags, a group's commands, or one command's flags.
func help(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" {
		return serve([]string{"-h"})
	}
	if c, rest := lookup(args); c != nil && len(rest) == 0 {
		return c.run([]string{"-h"})
	}
	if group := groupOf(args[0]); group != "" && len(args) == 1 {
		fmt.Fprintf(stdout, "usage: edge %s COMMAND [flags]\n\n%s\n\nrun 'edge help %s COMMAND' for a command's flags\n", args[0], group, args[0])
		return flag.ErrHelp
	}
	return fmt.Errorf("no such command 'edge %s'; run 'edge help' for the list", strings.Join(args, " "))
}

// usage prints a flag set's help: the command list and serve's flags for the edge itself,
// else the command's synopsis, summary and flags.
func usage(fs *flag.FlagSet) {
	w := stdout
	if fs.Name() == "edge" {
		fmt.Fprintf(w, "usage: edge [flags]           serve: websockets, the SQLite writer, embedded NATS\n")
		fmt.Fprintf(w, "       edge COMMAND [flags]   administer a data directory (through the running edge, if any)\n\ncommands:\n")
		for _, c := range commands() {
			fmt.Fprintf(w, "  %-48s %s\n", c.words+" "+c.synopsis, c.summary)
		}
		fmt.Fprintf(w, "\nrun 'edge help COMMAND' for a command's flags. Every flag can also be set from the\nenvironment: -nats-url from SPOOKAT_NATS_URL, and so on.\n\nserve flags:\n")
	} else {
		words := strings.TrimPrefix(fs.Name(), "edge ")
		summary, synopsis := "", ""
		for _, c := range commands() {
			if c.words == words {
				summary, synopsis = c.summary, c.synopsis
			}
		}
		fmt.Fprintf(w, "usage: %s %s\n\n", fs.Name(), synopsis)
		if summary != "" {
			fmt.Fprintf(w, "%s\n\n", summary)
		}
		fmt.Fprintf(w, "flags:\n")
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError is a command line the flag package refused; main adds where help is.
type usageError struct {
	cmd string
	err error
}

func (e usageError) Error() string {
	return fmt.Sprintf("%v\nrun '%s -h' for usage", e.err, e.cmd)
}

func (e usageError) Unwrap() error { return e.err }

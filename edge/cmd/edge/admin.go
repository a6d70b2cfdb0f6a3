package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/files"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/worker/egress"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// withAPI runs fn against the edge that holds dataDir, through its admin socket, or, when no
// edge runs, on the file directly (holding the data directory's lock meanwhile, so an edge
// starting now waits for us rather than sharing the writer role). A directory that holds no
// spookat database is refused: a mistyped -data would otherwise get a new database and a
// new NATS authority that no edge trusts.
func withAPI(dataDir string, fn func(ctx context.Context, api admin.API) error) error {
	if err := needData(dataDir); err != nil {
		return err
	}
	return withNewAPI(dataDir, fn)
}

// needData refuses a data directory without a spookat database.
func needData(dataDir string) error {
	if _, err := os.Stat(filepath.Join(dataDir, store.FileName)); err == nil {
		return nil
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	return fmt.Errorf("-data %s holds no spookat database (%s): name the data directory the edge serves from (-data or SPOOKAT_DATA), or create one by starting the edge there (edge -data %s) or with 'edge demo -data %s'",
		abs, store.FileName, dataDir, dataDir)
}

// withNewAPI is withAPI that creates the data directory and its database when missing
// (demo, seed).
func withNewAPI(dataDir string, fn func(ctx context.Context, api admin.API) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lock, free, err := admin.Lock(dataDir)
	if err != nil {
		return err
	}
	if !free {
		return fn(ctx, admin.NewClient(dataDir))
	}
	defer lock.Close()
	st, err := store.Open(dataDir, store.Options{Readers: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	auth, err := natsauth.Open(dataDir)
	if err != nil {
		return err
	}
	return fn(ctx, &admin.Ops{Store: st, Auth: auth, Files: files.Dir{Root: filepath.Join(dataDir, "files")}})
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func siteAdd(args []string) error {
	fs := flag.NewFlagSet("edge site add", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	s := &store.Site{}
	var origins multi
	fs.StringVar(&s.Name, "name", "", "site name (required)")
	fs.Var(&origins, "origin", "allowed page origin, e.g. https://example.com (repeatable; * allows any: development only)")
	fs.StringVar(&s.SlackToken, "slack-token", "", "Slack bot token (xoxb-…)")
	fs.StringVar(&s.SlackChannel, "slack-channel", "", "Slack channel id for conversation threads")
	fs.StringVar(&s.SlackSigningSecret, "slack-signing-secret", "", "Slack signing secret (replies from Slack)")
	fs.StringVar(&s.DiscordWebhook, "discord-webhook", "", "Discord webhook URL")
	fs.StringVar(&s.WebhookURL, "webhook-url", "", "URL that receives signed webhooks")
	fs.StringVar(&s.WebhookSecret, "webhook-secret", "", "webhook signing secret (whsec_…)")
	fs.StringVar(&s.NotifyEmail, "notify-email", "", "address told of each new conversation")
	allowPrivate := fs.Bool("allow-private-targets", false, "labs and tests only: take http:// and loopback or private addresses in -webhook-url and -discord-webhook")
	force := fs.Bool("force", false, "add the site even when one with the same name and origin exists")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if s.Name == "" {
		return errors.New(`-name is required, e.g. -name "Shop"`)
	}
	if len(origins) == 0 {
		return errors.New("-origin is required, e.g. -origin https://shop.example (repeatable; * allows any page: development only)")
	}
	for _, o := range origins {
		n, err := store.NormalizeOrigin(o)
		if err != nil {
			return fmt.Errorf("-origin: %w", err)
		}
		s.Origins = append(s.Origins, n)
	}
	if s.SlackChannel != "" {
		if err := store.CheckSlackChannel(s.SlackChannel); err != nil {
			return fmt.Errorf("-slack-channel: %w", err)
		}
	}
	if (s.SlackChannel == "") != (s.SlackToken == "") {
		return errors.New("-slack-token and -slack-channel go together, e.g. -slack-token xoxb-… -slack-channel C0123ABCD")
	}
	if s.SlackToken != "" {
		if err := store.CheckSlackToken(s.SlackToken); err != nil {
			return fmt.Errorf("-slack-token: %w", err)
		}
	}
	if s.NotifyEmail != "" {
		if err := store.CheckEmail(s.NotifyEmail); err != nil {
			return fmt.Errorf("-notify-email %w", err)
		}
	}
	if s.WebhookURL != "" && s.WebhookSecret == "" {
		return errors.New("-webhook-url needs -webhook-secret")
	}
	if err := checkTargetFlags(s.WebhookURL, s.DiscordWebhook, *allowPrivate); err != nil {
		return err
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		if !*force {
			list, err := api.ListSites(ctx)
			if err != nil {
				return err
			}
			if d := sameSite(list, s); d != nil {
				return fmt.Errorf("site %d %q already has the origin %s (key %s): pass -force to add another one, or change it in the inbox's settings", d.ID, d.Name, sharedOrigin(d.Origins, s.Origins), d.Key)
			}
		}
		site, err := api.AddSite(ctx, s)
		if err != nil {
			return err
		}
		info := admin.InfoOf(site)
		if *asJSON {
			return printJSON(info)
		}
		targets := "none (the inbox only)"
		if len(info.Targets) > 0 {
			targets = strings.Join(info.Targets, " ")
		}
		fmt.Printf("site %d %q added; key %s; delivers to %s\n", site.ID, site.Name, site.Key, targets)
		return nil
	})
}

// sameSite is a site of list with s's name (any case) and one of its origins, or nil: most
// likely the same command run twice.
func sameSite(list []admin.SiteInfo, s *store.Site) *admin.SiteInfo {
	for i := range list {
		if strings.EqualFold(list[i].Name, s.Name) && sharedOrigin(list[i].Origins, s.Origins) != "" {
			return &list[i]
		}
	}
	return nil
}

func sharedOrigin(a, b []string) string {
	for _, o := range a {
		if slices.Contains(b, o) {
			return o
		}
	}
	return ""
}

// checkTargetFlags refuses the targets the worker would refuse (package egress). The error
// never repeats a URL: a Discord webhook's path is its token.
func checkTargetFlags(webhook, discord string, allowPrivate bool) error {
	if webhook != "" {
		if err := egress.CheckWebhookURL(webhook, allowPrivate); err != nil {
			return fmt.Errorf("-webhook-url %s, e.g. -webhook-url %s (a lab receiver on this host needs -allow-private-targets here and on the worker)", err, egress.WebhookExample)
		}
	}
	if discord != "" {
		if err := egress.CheckDiscordURL(discord, allowPrivate); err != nil {
			return fmt.Errorf("-discord-webhook %s, e.g. -discord-webhook %s", err, egress.DiscordExample)
		}
	}
	return nil
}

func siteList(args []string) error {
	fs := flag.NewFlagSet("edge site list", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		list, err := api.ListSites(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(list)
		}
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKEY\tNAME\tBRAKE\tRETENTION\tORIGINS\tTARGETS")
		for _, s := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Key, s.Name, s.BrakeLevel, retention(s.RetentionDays), strings.Join(s.Origins, " "), strings.Join(s.Targets, " "))
		}
		return tw.Flush()
	})
}

// retention says a site's retention in a word.
func retention(days int) string {
	if days == 0 {
		return "forever"
	}
	return strconv.Itoa(days) + "d"
}

// siteRetention sets how long a site keeps an idle conversation.
func siteRetention(args []string) error {
	fs := flag.NewFlagSet("edge site retention", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.RetentionRequest{Days: -1}
	fs.StringVar(&req.SiteKey, "site", "", "the site's key (required; see edge site list)")
	fs.IntVar(&req.Days, "days", -1, "delete a conversation, its messages, attachments and visitor this many days after its last message (required; 0: keep forever)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if req.SiteKey == "" {
		return errors.New("-site is required, e.g. -site st_… (see `edge site list`)")
	}
	if req.Days < 0 {
		return errors.New("-days is required: the days a conversation is kept after its last message, e.g. -days 365 (0: forever)")
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		info, err := api.SetRetention(ctx, req)
		if err != nil {
			return err
		}
		if info.RetentionDays == 0 {
			fmt.Printf("%s keeps its conversations\n", info.Key)
		} else {
			fmt.Printf("%s deletes a conversation %d days after its last message (applied every 10 minutes)\n", info.Key, info.RetentionDays)
		}
		return nil
	})
}

// personFlags declares the flags that name a site and one person of it (edge visitor …).
func personFlags(fs *flag.FlagSet) *admin.PersonRequest {
	req := &admin.PersonRequest{}
	fs.StringVar(&req.SiteKey, "site", "", "the site's key (required; see edge site list)")
	fs.Int64Var(&req.VisitorID, "visitor", 0, "the person by a visitor id")
	fs.StringVar(&req.Email, "email", "", "the person by email (any case; every visitor that gave it)")
	fs.StringVar(&req.UserID, "user", "", "the person by the site's user id")
	return req
}

// visitorExport writes everything a site holds about one person to one .tar.gz: person.json
// and their attachments, read from the data directory (schema/PROTOCOL.md, "A person's data").
func visitorExport(args []string) error {
	fs := flag.NewFlagSet("edge visitor export", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := personFlags(fs)
	out := fs.String("out", "", "the archive to write, e.g. person.tar.gz (required; not overwritten)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if req.SiteKey == "" {
		return errors.New("-site is required, e.g. -site st_… (see `edge site list`)")
	}
	if *out == "" {
		return errors.New("-out is required: the archive to write, e.g. -out person.tar.gz")
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // before the export: it is audited
		if err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		p, err := api.ExportPerson(ctx, *req)
		if err != nil {
			f.Close()
			os.Remove(*out)
			return err
		}
		if err := files.WritePersonArchive(f, p, files.Dir{Root: filepath.Join(*dataDir, "files")}); err != nil {
			f.Close()
			os.Remove(*out)
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Printf("%s: %d visitor records, %d conversations, %d attachments of %s\n", *out, len(p.Visitors), len(p.Conversations), len(p.Files()), p.Site.Name)
		return nil
	})
}

// visitorErase deletes everything a site holds about one person, to the bytes
// (ops/RUNBOOK.md, "A person asks to be forgotten"). -yes confirms: nothing brings it back.
func visitorErase(args []string) error {
	fs := flag.NewFlagSet("edge visitor erase", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := personFlags(fs)
	yes := fs.Bool("yes", false, "erase for good (required: nothing brings it back)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if req.SiteKey == "" {
		return errors.New("-site is required, e.g. -site st_… (see `edge site list`)")
	}
	if !*yes {
		return errors.New("-yes is required: the person's conversations, messages and files are deleted for good (export them first with `edge visitor export` if they asked for them)")
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		e, err := api.ErasePerson(ctx, *req)
		if err != nil {
			return err
		}
		fmt.Printf("erased %d visitor records, %d conversations, %d messages, %d files\n", e.Visitors, e.Conversations, e.Messages, e.Files)
		fmt.Println("webhook event person.erased:", e.WebhookEvent)
		fmt.Println("their jobs still waiting in JOBS:", e.WaitingJobs)
		if !e.WALEmptied {
			fmt.Println("the WAL could not be emptied now (readers or a burst of commits): run the same command again, or it empties with the WAL's next restart")
		}
		for _, d := range e.Delivered {
			where := d.Target + " " + d.ExternalID
			if d.Thread != "" {
				where += " in thread " + d.Thread
			}
			fmt.Printf("already delivered, not unsent: conversation %d to %s\n", d.Conversation, where)
		}
		return nil
	})
}

func operatorAdd(args []string) error {
	fs := flag.NewFlagSet("edge operator add", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.OperatorRequest{}
	var keys multi
	fs.StringVar(&req.Email, "email", "", "operator's email (login)")
	fs.StringVar(&req.Name, "name", "", "name shown to visitors (default: the email's local part)")
	fs.Var(&keys, "site", "key of a site the operator answers for (required, repeatable; see edge site list)")
	fromStdin := fs.Bool("password-stdin", false, "read the password from standard input")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needEmail(req.Email); err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("-site is required: the operator answers for at least one site, e.g. -site st_… (see `edge site list`)")
	}
	pw, err := readPassword(*fromStdin)
	if err != nil {
		return err
	}
	req.Password = pw
	req.SiteKeys = keys
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		op, err := api.AddOperator(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(op)
		}
		fmt.Printf("operator %d %s added\n", op.ID, op.Email)
		return nil
	})
}

func seed(args []string) error {
	fs := flag.NewFlagSet("edge seed", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.SeedRequest{}
	fs.IntVar(&req.Sites, "sites", 1200, "number of sites to create")
	fs.StringVar(&req.NamePrefix, "prefix", "load", "site name prefix")
	fs.StringVar(&req.Origin, "origin", "*", "allowed origin of every seeded site")
	fs.StringVar(&req.SlackToken, "slack-token", "", "give every seeded site Slack delivery, each its own channel")
	fs.StringVar(&req.WebhookURL, "webhook-url", "", "give every seeded site this webhook")
	fs.StringVar(&req.WebhookSecret, "webhook-secret", "", "secret of -webhook-url")
	allowPrivate := fs.Bool("allow-private-targets", false, "labs and tests only: take http:// and loopback or private addresses in -webhook-url")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkTargetFlags(req.WebhookURL, "", *allowPrivate); err != nil {
		return err
	}
	return withNewAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		start := time.Now()
		res, err := api.Seed(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(res)
		}
		fmt.Printf("%d sites created in %s\n", len(res.Sites), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// demoLogin is the demo site and operator, kept in data/demo.json.
type demoLogin struct {
	SiteKey  string `json:"site_key"`
	Email    string `json:"email"`
	Password string `json:"password"`
	path     string // the file that keeps them
	opsCreds string // an SRE's read-only NATS credentials
}

// demo creates the demo site and operator once and prints how to try them; the listeners
// are known only to a serving edge, which prints them with -demo (make run).
func demo(args []string) error {
	fs := flag.NewFlagSet("edge demo", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory (created when new)")
	public := fs.String("public-url", "http://localhost:8080", "URL browsers use to reach the edge")
	if err := parse(fs, args); err != nil {
		return err
	}
	if want, ok := httpURL(*public); !ok {
		return fmt.Errorf("-public-url must be %s", want)
	}
	d, err := ensureDemo(*dataDir)
	if err != nil {
		return err
	}
	printDemo(os.Stdout, d, *public, nil)
	fmt.Printf("  (edge -demo -data %s prints the addresses it listens on once it serves)\n\n", *dataDir)
	return nil
}

// ensureDemo creates the demo site and operator, and an SRE's read-only NATS identity (so
// that `nats stream report` works from the first run), unless they exist.
func ensureDemo(dataDir string) (demoLogin, error) {
	d := demoLogin{path: filepath.Join(dataDir, "demo.json"), opsCreds: filepath.Join(dataDir, "ops.creds")}
	if b, err := os.ReadFile(d.path); err == nil {
		if err := json.Unmarshal(b, &d); err != nil {
			return d, fmt.Errorf("%s: %w", d.path, err)
		}
	} else {
		pw := make([]byte, 12)
		rand.Read(pw)
		d.Email, d.Password = "demo@spookat.test", base64.RawURLEncoding.EncodeToString(pw)
		err := withNewAPI(dataDir, func(ctx context.Context, api admin.API) error {
			site, err := api.AddSite(ctx, &store.Site{Name: "Demo site", Origins: []string{"*"}})
			if err != nil {
				return err
			}
			d.SiteKey = site.Key
			_, err = api.AddOperator(ctx, admin.OperatorRequest{Email: d.Email, Name: "Demo operator", Password: d.Password, SiteKeys: []string{site.Key}})
			return err
		})
		if err != nil {
			return d, err
		}
		b, _ := json.MarshalIndent(d, "", "  ")
		if err := os.WriteFile(d.path, b, 0o600); err != nil {
			return d, err
		}
	}
	if _, err := os.Stat(d.opsCreds); errors.Is(err, os.ErrNotExist) {
		if _, err := issue(dataDir, schema.RoleOps, "", d.opsCreds, time.Time{}); err != nil {
			return d, err
		}
	}
	return d, nil
}

// printDemo prints the demo's logins and URLs under public; with a serving edge's
// addresses (a), the listeners it bound too.
func printDemo(w io.Writer, d demoLogin, public string, a *server.Addrs) {
	u := strings.TrimRight(public, "/")
	fmt.Fprintf(w, `
spookat demo
  site key        %s
  operator login  %s  password %s   (kept in %s)

  widget demo     %s/demo?site=%s
  operator inbox  %s/app
  websocket       %s/v1/widget/ws?site=%s
  health          %s/readyz
`, d.SiteKey, d.Email, d.Password, d.path, u, d.SiteKey, u, strings.Replace(u, "http", "ws", 1), d.SiteKey, u)
	if a == nil {
		return
	}
	metrics, monitor := "off (-metrics-addr)", "off (-nats-monitor)"
	if a.Metrics != "" {
		metrics = "http://" + a.Metrics + "/metrics"
	}
	if a.NATSMonitor != "" {
		monitor = a.NATSMonitor
	}
	fmt.Fprintf(w, `  metrics         %s
  NATS            %s, credentials only (read-only ones in %s):
                  make nats; bin/nats --server %s --creds %s --js-api-prefix %s stream report
  NATS monitor    %s

`, metrics, a.NATS, d.opsCreds, a.NATS, d.opsCreds, schema.OpsAPIPrefix, monitor)
}

// urlOf is the URL a browser on this machine uses for a bound address: a wildcard host is
// reached as localhost.
func urlOf(bound string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "http://" + bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func needEmail(email string) error {
	if email == "" {
		return errors.New("-email is required, e.g. -email ann@shop.example")
	}
	if err := store.CheckEmail(email); err != nil {
		return fmt.Errorf("-email %w", err)
	}
	return nil
}

// readPassword reads one line from standard input: a password on the command line would
// sit in the shell's history and in every `ps` listing.
func readPassword(fromStdin bool) (string, error) {
	if !fromStdin {
		return "", errors.New("give the password on standard input with -password-stdin (never on the command line), e.g. printf '%s\\n' \"$PASSWORD\" | edge operator … -password-stdin")
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", errors.New("-password-stdin: no password on standard input")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func operatorPasswd(args []string) error {
	fs := flag.NewFlagSet("edge operator passwd", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.PasswordRequest{}
	fs.StringVar(&req.Email, "email", "", "operator's email (required)")
	fromStdin := fs.Bool("password-stdin", false, "read the new password from standard input (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needEmail(req.Email); err != nil {
		return err
	}
	pw, err := readPassword(*fromStdin)
	if err != nil {
		return err
	}
	req.Password = pw
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		op, err := api.SetPassword(ctx, req)
		if err != nil {
			return err
		}
		fmt.Printf("operator %d %s: new password set; every session and API token of theirs revoked\n", op.ID, op.Email)
		return nil
	})
}

func operatorRemove(args []string) error {
	fs := flag.NewFlagSet("edge operator remove", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.OperatorRef{}
	fs.StringVar(&req.Email, "email", "", "operator's email (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needEmail(req.Email); err != nil {
		return err
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		op, err := api.RemoveOperator(ctx, req)
		if err != nil {
			return err
		}
		fmt.Printf("operator %d %s removed, with their sessions, API tokens and memberships\n", op.ID, op.Email)
		return nil
	})
}

func operatorList(args []string) error {
	fs := flag.NewFlagSet("edge operator list", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		list, err := api.ListOperators(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(list)
		}
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tEMAIL\tNAME\tSESSIONS\tTOKENS\tSITES")
		for _, o := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\n", o.ID, o.Email, o.Name, o.Sessions, o.Tokens, strings.Join(o.SiteKeys, " "))
		}
		return tw.Flush()
	})
}

func siteMember(add bool, args []string) error {
	name := "edge site member remove"
	if add {
		name = "edge site member add"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.MemberRequest{}
	fs.StringVar(&req.SiteKey, "site", "", "the site's key (required; see edge site list)")
	fs.StringVar(&req.Email, "email", "", "operator's email (required)")
	role := "owner"
	if add {
		fs.StringVar(&role, "role", "owner", "owner (settings, channels, members) or agent (answers)")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if req.SiteKey == "" {
		return errors.New("-site is required, e.g. -site st_… (see `edge site list`)")
	}
	if add {
		r, err := store.ParseRole(role)
		if err != nil {
			return err
		}
		req.Role = r
	}
	if err := needEmail(req.Email); err != nil {
		return err
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		var res *admin.MemberResult
		var err error
		if add {
			res, err = api.AddMember(ctx, req)
		} else {
			res, err = api.RemoveMember(ctx, req)
		}
		if err != nil {
			return err
		}
		switch {
		case add && res.Changed:
			fmt.Printf("%s is now a member of %s (%s)\n", res.Operator.Email, res.SiteKey, req.Role)
		case add:
			fmt.Printf("%s was a member of %s already\n", res.Operator.Email, res.SiteKey)
		case res.Changed && res.Live:
			fmt.Printf("%s is no longer a member of %s; their inbox sockets were closed\n", res.Operator.Email, res.SiteKey)
		case res.Changed:
			fmt.Printf("%s is no longer a member of %s\n", res.Operator.Email, res.SiteKey)
		default:
			fmt.Printf("%s was not a member of %s\n", res.Operator.Email, res.SiteKey)
		}
		return nil
	})
}

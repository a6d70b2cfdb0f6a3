package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/store"
)

// auditCmd prints the audit log: the installation's (every entry), or one site's as its
// owners see it in the inbox. Newest first.
func auditCmd(args []string) error {
	fs := flag.NewFlagSet("edge audit", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.AuditRequest{}
	fs.StringVar(&req.SiteKey, "site", "", "one site's log (its key); without it, every entry of the installation")
	action := fs.String("action", "", "only this action, e.g. login_failed, person_erased, creds_issued")
	since := fs.String("since", "", "only entries from this date (2026-11-30) or time (RFC 3339) on")
	fs.IntVar(&req.Limit, "limit", 100, "at most this many entries (up to 500)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	req.Action = store.AuditAction(*action)
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			if t, err = time.ParseInLocation(time.DateOnly, *since, time.Local); err != nil {
				return fmt.Errorf("-since %q: give a date (2026-11-30) or a time (2026-11-30T09:00:00Z)", *since)
			}
		}
		req.From = t.UnixMilli()
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		list, err := api.AuditLog(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			if list == nil {
				list = []store.AuditEntry{}
			}
			return printJSON(list)
		}
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tACTOR\tADDRESS\tSITE\tACTION\tDETAIL")
		for _, e := range list {
			site, detail := "-", ""
			if e.SiteID != 0 {
				site = fmt.Sprint(e.SiteID)
			}
			if len(e.Detail) > 0 {
				b, _ := json.Marshal(e.Detail)
				detail = string(b)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", time.UnixMilli(e.At).UTC().Format("2006-01-02 15:04:05Z"),
				e.Actor, cmp.Or(e.Address, "-"), site, e.Action, detail)
		}
		return tw.Flush()
	})
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"spookat/loadgen/internal/stairs"
)

func cmdFlood(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadgen flood", flag.ContinueOnError)
	var f runFlags
	f.register(fs, "")
	rate := fs.Float64("rate", 200, "messages/s over the other sites")
	dur := fs.Duration("duration", 90*time.Second, "length of the flood (and of the baseline)")
	visitors := fs.Float64("visitors", 5, "new visitors a second on the flooded site")
	baseline := fs.Bool("baseline", true, "first run the same traffic without the flood, to compare p99 and errors")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: loadgen flood [flags]\n\nThe seed's flood test: one site gets -visitors new visitors a second (each opens a socket\nand starts a conversation) while the other sites carry -rate messages a second. Reports\nadmitted vs rejected for the flooded site, and the others' p99 and errors against a run\nwithout the flood. (-stairs and -step are ignored.)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	f.stairs = "1"
	if f.out == "report.json" {
		f.out = "flood.json"
	}
	if f.md == "report.md" {
		f.md = "flood.md"
	}
	cfg, err := f.config(ctx)
	if err != nil {
		return err
	}
	if len(cfg.Keys) < 2 {
		return fmt.Errorf("flood needs at least 2 sites, got %d", len(cfg.Keys))
	}
	flooded := cfg.Keys[0]
	cfg.Keys = cfg.Keys[1:]
	rep, err := stairs.Flood(ctx, stairs.FloodConfig{
		Base:           cfg,
		FloodKey:       flooded,
		Rate:           *rate,
		Duration:       *dur,
		VisitorsPerSec: *visitors,
		Baseline:       *baseline,
	})
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Print(md)
	if f.out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if f.md != "" {
		if err := os.WriteFile(f.md, []byte(md), 0o644); err != nil {
			return err
		}
	}
	return nil
}

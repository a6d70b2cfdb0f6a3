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

// cmdIdle opens many widget sockets that send nothing and reports what each costs the edge.
func cmdIdle(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadgen idle", flag.ContinueOnError)
	var f runFlags
	f.register(fs, "")
	settle := fs.Duration("settle", 15*time.Second, "how long the sockets stay open before the figures are read")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: loadgen idle [flags]\n\nSeeds sites through the running edge, opens -sockets widget websockets that send nothing,\nwaits -settle and prints the edge's RSS growth a socket (and Go's heap and stacks, from its\n/metrics). Both ends need a file limit above -sockets.\n\n")
		fs.PrintDefaults()
	}
	f.sockets = 18000
	if err := fs.Parse(args); err != nil {
		return err
	}
	f.stairs = "1" // not walked: idle sends nothing
	cfg, err := f.config(ctx)
	if err != nil {
		return err
	}
	rep, err := stairs.Idle(ctx, cfg, *settle)
	if err != nil {
		return err
	}
	fmt.Println(rep.Line())
	outSet := false
	fs.Visit(func(fl *flag.Flag) { outSet = outSet || fl.Name == "out" })
	if outSet && f.out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(f.out, append(b, '\n'), 0o644)
	}
	return nil
}

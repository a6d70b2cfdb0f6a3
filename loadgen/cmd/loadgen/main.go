// Command loadgen loads a spookat edge the way the seed's load test did, reproducibly:
//
//	loadgen run      stairs of fixed aggregate rates against a running edge, with a report
//	loadgen flood    one site flooded with new visitors while the others carry steady traffic
//	loadgen compare  starts the processes itself and runs the stairs in one- and two-process setups
//	loadgen mock     the Slack, Discord and webhook mocks (package spookat/loadgen/mock)
//
// Run `loadgen <command> -h` for the flags of each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage: loadgen <command> [flags]

commands:
  run      stairs of fixed aggregate message rates against a running edge
  flood    the flood test: one site gets new visitors every second while the others chat
  compare  one- vs two-process, with and without the Slack mock: starts everything itself
  idle     many open sockets that send nothing: what each costs the edge's memory
`)
	fmt.Fprint(os.Stderr, mockUsage)
	fmt.Fprint(os.Stderr, "\nloadgen <command> -h shows the flags of a command.\n")
}

// mockUsage and mockRun are set by mock.go.
var (
	mockUsage string
	mockRun   func(args []string) error
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "run":
		err = cmdRun(ctx, args)
	case "flood":
		err = cmdFlood(ctx, args)
	case "compare":
		err = cmdCompare(ctx, args)
	case "idle":
		err = cmdIdle(ctx, args)
	case "mock":
		if mockRun == nil {
			err = errors.New("this loadgen was built without the mocks")
		} else {
			err = mockRun(args)
		}
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "loadgen: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

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
	"strings"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, os.Args[1:])
	var unknown unknownCommand
	switch {
	case errors.Is(err, flag.ErrHelp): // help was asked for and printed
	case errors.As(err, &unknown):
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		usage()
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// unknownCommand is a command word loadgen does not know.
type unknownCommand string

func (u unknownCommand) Error() string {
	if u == "" {
		return "which command?"
	}
	return fmt.Sprintf("unknown command %q", string(u))
}

// dispatch runs the command args name; `help CMD` is `CMD -h`.
func dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return unknownCommand("")
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "run":
		return cmdRun(ctx, args)
	case "flood":
		return cmdFlood(ctx, args)
	case "compare":
		return cmdCompare(ctx, args)
	case "idle":
		return cmdIdle(ctx, args)
	case "mock":
		if mockRun == nil {
			return errors.New("this loadgen was built without the mocks")
		}
		return mockRun(args)
	case "-h", "-help", "--help", "help":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			return dispatch(ctx, []string{args[0], "-h"})
		}
		usage()
		return flag.ErrHelp
	default:
		return unknownCommand(cmd)
	}
}

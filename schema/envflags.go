package schema

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the environment variable that sets a command's flag: SPOOKAT_ then the flag's
// name in capitals with underscores (-nats-url: SPOOKAT_NATS_URL). The edge and the worker
// both follow it, for every flag.
func EnvName(flagName string) string {
	return "SPOOKAT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// FlagsFromEnv sets each flag of a parsed fs that the command line did not give from its
// environment variable (EnvName), if set; a value the flag refuses is an error naming the
// variable.
func FlagsFromEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil && err == nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

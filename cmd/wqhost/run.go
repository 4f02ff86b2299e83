package main

import (
	"context"
	"errors"
)

const runDoc = `
Runs the host: every binding of the config (or, with no --config, the embedded default: the
local queue store under --data-dir and the billing example handler reading the queue
"transactions" and writing priced lines to "priced") until SIGINT or SIGTERM, which drain it
gracefully. SIGHUP reloads the config and changed modules.
--demo loads the shipped billing sample (3000 transactions, a few malformed) into the default
binding's queue, processes it with a progress bar, prints a summary and exits.`

func (c *cli) run(ctx context.Context, args []string) error {
	fl := c.flags("run", "[--config FILE] [--data-dir DIR] [--admin ADDR] [--demo]", runDoc)
	cfgFile := configFlags(fl)
	fl.String("admin", "", "admin API listen address (overrides admin.addr; default 127.0.0.1:8480; off disables it)")
	fl.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	fl.String("log-format", "", "text or json (overrides log.format)")
	demo := fl.Bool("demo", false, "process the shipped billing sample on the embedded default, print a summary, exit")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments (got %q)", fl.Args())
	}
	if *demo && *cfgFile != "" {
		return usagef("--demo runs on the embedded default; it does not take --config")
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	_ = cfg
	return errors.New("the host package has not landed yet")
}

// Command builtinplugin serves wqhost's built-in policies (plugins/builtin, default options)
// as an external plugin, so that benchmarks compare the same decisions made in process and
// over go-plugin: any difference is the plugin transport's cost.
package main

import (
	"github.com/wqhost/wqhost/plugins/builtin"
	"github.com/wqhost/wqhost/plugins/sdk"
)

func main() {
	sdk.Serve(sdk.Policies{
		Name:    "builtinplugin",
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:  builtin.NewTarget(0),
		Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
	})
}

package admin

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/wqhost/wqhost/host/internal/adminqueue"
)

// The audit log: every state-changing request (a send, a reload, a rollback, a dead-letter
// redrive or purge, a job cancelled) logs one INFO line "admin action" naming the actor (the
// token's principal: host, or tenant/<name>), the action, its target, how many messages
// or versions it touched, and where it came from (the client's address; via=console and the
// browser's address for the console's in-process calls).

type viaKey struct{}

// via is where an in-process request came from.
type via struct {
	name, remote string
}

// ViaConsole marks ctx as the console's, acting for a browser at remote: the audit log
// names the console and the browser's address instead of an empty in-process address.
func ViaConsole(ctx context.Context, remote string) context.Context {
	return context.WithValue(ctx, viaKey{}, via{name: "console", remote: remote})
}

// actor names p as the audit log does.
func (p principal) actor() string {
	if p.host {
		return "host"
	}
	return "tenant/" + p.tenant
}

// audit logs one state-changing action of p on target: count is how many messages (or
// module versions) it touched, -1 when not known yet (a redrive's job logs its end).
func (s *server) audit(r *http.Request, p principal, action, target string, count int64, attrs ...any) {
	base := []any{"actor", p.actor(), "action", action, "target", target, "count", count}
	if v, ok := r.Context().Value(viaKey{}).(via); ok {
		base = append(base, "via", v.name, "remote", v.remote)
	} else if r.RemoteAddr != "" {
		base = append(base, "remote", r.RemoteAddr)
	}
	s.log.InfoContext(r.Context(), "admin action", append(base, attrs...)...)
}

// reloadCount is how many bindings and plugins a reload's result says it acted on, -1 when
// the host's result does not say.
func reloadCount(res any) int64 {
	if c, ok := res.(interface{ Changed() int }); ok {
		return int64(c.Changed())
	}
	return -1
}

// filterText is a dead-letter filter as the API's JSON writes it ({} selects every one).
func filterText(f adminqueue.Filter) string {
	b, err := json.Marshal(f)
	if err != nil {
		return "?"
	}
	return string(b)
}

package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/host/config"
	wqnats "github.com/wqhost/wqhost/listener/nats"
)

// openNATS connects a backend of type nats: secrets from the environment variables and
// files the config names (relative paths against the config's directory).
func openNATS(ctx context.Context, cfg *config.Config, name string, bc config.Backend, log *slog.Logger) (*wqnats.Backend, error) {
	n := bc.NATS
	key := func(k string) string { return "backends." + name + ".nats." + k }
	file := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(cfg.BaseDir, p)
	}
	env := func(k, v string) (string, error) {
		if v == "" {
			return "", nil
		}
		s := os.Getenv(v)
		if s == "" {
			return "", fmt.Errorf("%s: environment variable %s is empty or unset", key(k), v)
		}
		return s, nil
	}
	var errs []error
	get := func(k, v string) string {
		s, err := env(k, v)
		errs = append(errs, err)
		return s
	}
	jwt, seed := get("jwt_env", n.JWTEnv), get("nkey_seed_env", n.NKeySeedEnv)
	user, pass := get("user_env", n.UserEnv), get("password_env", n.PasswordEnv)
	token := get("token_env", n.TokenEnv)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	copts := []natsgo.Option{natsgo.Name("wqhost")}
	switch {
	case n.CredsFile != "":
		copts = append(copts, natsgo.UserCredentials(file(n.CredsFile)))
	case n.NKeySeedFile != "":
		o, err := natsgo.NkeyOptionFromSeed(file(n.NKeySeedFile))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key("nkey_seed_file"), err)
		}
		copts = append(copts, o)
	case jwt != "":
		copts = append(copts, natsgo.UserJWTAndSeed(jwt, seed))
	case user != "":
		copts = append(copts, natsgo.UserInfo(user, pass))
	case token != "":
		copts = append(copts, natsgo.Token(token))
	}
	if n.CAFile != "" {
		copts = append(copts, natsgo.RootCAs(file(n.CAFile)))
	}
	if n.CertFile != "" {
		copts = append(copts, natsgo.ClientCert(file(n.CertFile), file(n.KeyFile)))
	}
	queues := make(map[string]wqnats.QueueBinding, len(n.Queues))
	for q, qb := range n.Queues {
		queues[q] = wqnats.QueueBinding{Stream: qb.Stream, Subject: qb.Subject}
	}
	// The queues ordered bindings read route order keys to group subjects, for every process
	// that opens the backend with this config (hosts, and `wqhost send`).
	ordered := map[string]bool{}
	for tn, t := range cfg.Tenants {
		for _, bd := range t.Bindings {
			if bd.Ordered && bd.Backend == name {
				ordered[cfg.PhysicalQueue(tn, name, bd.Queue)] = true
			}
		}
	}
	b, err := wqnats.Open(ctx, wqnats.Options{
		URLs: n.URLs, Conn: copts, CreateQueues: bc.CreateQueues, Replicas: n.Replicas, AdoptStreams: n.AdoptStreams,
		MemoryStorage: n.Storage == "memory", StreamPrefix: n.StreamPrefix, SubjectPrefix: n.SubjectPrefix,
		Queues: queues, Consumer: n.Consumer, AckWait: n.AckWait, PullHold: n.PullHold,
		PullHeartbeat: n.PullHeartbeat, Logger: log, Ordered: ordered,
	})
	if err != nil {
		return nil, fmt.Errorf("backends.%s: %w", name, err)
	}
	return b, nil
}

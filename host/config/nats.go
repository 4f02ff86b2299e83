package config

import (
	"time"
)

// BackendNATS is the type of a NATS JetStream backend (listener/nats).
const BackendNATS = "nats"

// NATS configures a backend of type nats: the servers, how to authenticate, and which
// stream and subject each queue uses. Secrets come from environment variables or files,
// never from the config itself.
type NATS struct {
	// URLs are the servers (nats://host:4222 or tls://host:4222); at least one. The client
	// learns the rest of the cluster from them and fails over.
	URLs []string `koanf:"urls"`
	// CredsFile is a credentials file (user JWT and NKey seed, as `nsc` writes it).
	CredsFile string `koanf:"creds_file"`
	// NKeySeedFile is an NKey seed file (user NKey authentication without a JWT).
	NKeySeedFile string `koanf:"nkey_seed_file"`
	// JWTEnv and NKeySeedEnv name environment variables holding a user JWT and its NKey
	// seed (both required together).
	JWTEnv      string `koanf:"jwt_env"`
	NKeySeedEnv string `koanf:"nkey_seed_env"`
	// UserEnv and PasswordEnv name environment variables holding a user and password.
	UserEnv     string `koanf:"user_env"`
	PasswordEnv string `koanf:"password_env"`
	// TokenEnv names an environment variable holding an authentication token.
	TokenEnv string `koanf:"token_env"`
	// TLS: CAFile verifies the servers; CertFile and KeyFile present a client certificate.
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// Replicas of the streams create_queues creates: 1 (default), 3 or 5. Use 3 on a
	// cluster: a stream then survives the loss of one node without losing a message.
	Replicas int `koanf:"replicas"`
	// AdoptStreams uses existing streams as they are. Without it a stream whose retention
	// is not workqueue is refused at start, and one with fewer replicas than Replicas has
	// them raised (refused when the cluster cannot).
	AdoptStreams bool `koanf:"adopt_streams"`
	// Storage of created streams: file (default) or memory.
	Storage string `koanf:"storage"`
	// StreamPrefix names a queue's stream (prefix + the queue name, characters a stream
	// name cannot hold escaped as _XX); default "WQ_". SubjectPrefix forms its subject
	// (prefix + queue); default "wqhost.q.".
	StreamPrefix  string `koanf:"stream_prefix"`
	SubjectPrefix string `koanf:"subject_prefix"`
	// Consumer is the name of the durable consumer all hosts share; default "wqhost".
	Consumer string `koanf:"consumer"`
	// AckWait is the consumer's AckWait (default 30s); set it to the bindings' visibility
	// timeout, so a receive needs no extra request to set the lease.
	AckWait time.Duration `koanf:"ack_wait"`
	// PullHold is how long an idle binding's one pull request waits before it is re-armed
	// (default 15m: 4 requests per idle hour). PullHeartbeat is the server's heartbeat on it
	// (default 5s), by which a pull lost with its server is re-armed.
	PullHold      time.Duration `koanf:"pull_hold"`
	PullHeartbeat time.Duration `koanf:"pull_heartbeat"`
	// Queues binds queues (physical names: <tenant>.<queue> for a tenant other than
	// default) to existing streams and subjects, instead of the prefixes.
	Queues map[string]NATSQueue `koanf:"queues"`
}

// NATSQueue binds one queue to a stream and subject.
type NATSQueue struct {
	// Stream is the stream's name.
	Stream string `koanf:"stream"`
	// Subject is the subject the queue publishes to and consumes; default: the stream's
	// first subject.
	Subject string `koanf:"subject"`
}

func validateNATS(fail failFunc, path string, b Backend) {
	n := b.NATS
	p := path + ".nats"
	if len(n.URLs) == 0 {
		fail(p+".urls", "at least one server url is required for a backend of type nats")
	}
	for _, e := range []struct{ k, v string }{
		{"jwt_env", n.JWTEnv}, {"nkey_seed_env", n.NKeySeedEnv}, {"user_env", n.UserEnv},
		{"password_env", n.PasswordEnv}, {"token_env", n.TokenEnv},
	} {
		checkEnvName(fail, p+"."+e.k, e.v)
	}
	ways := 0
	for _, set := range []bool{n.CredsFile != "", n.NKeySeedFile != "", n.JWTEnv != "" || n.NKeySeedEnv != "", n.UserEnv != "" || n.PasswordEnv != "", n.TokenEnv != ""} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		fail(p, "at most one of creds_file, nkey_seed_file, jwt_env+nkey_seed_env, user_env+password_env, token_env (got %d)", ways)
	}
	if (n.JWTEnv == "") != (n.NKeySeedEnv == "") {
		fail(p+".jwt_env", "jwt_env and nkey_seed_env go together")
	}
	if (n.UserEnv == "") != (n.PasswordEnv == "") {
		fail(p+".user_env", "user_env and password_env go together")
	}
	if (n.CertFile == "") != (n.KeyFile == "") {
		fail(p+".cert_file", "cert_file and key_file go together")
	}
	switch n.Replicas {
	case 0, 1, 3, 5:
	default:
		fail(p+".replicas", "%d is not 1, 3 or 5", n.Replicas)
	}
	oneOf(fail, p+".storage", n.Storage, "", "file", "memory")
	if n.AckWait < 0 || n.PullHold < 0 || n.PullHeartbeat < 0 {
		fail(p, "ack_wait, pull_hold and pull_heartbeat must not be negative")
	}
	if n.PullHold > 0 && n.PullHeartbeat > 0 && 2*n.PullHeartbeat >= n.PullHold {
		fail(p+".pull_heartbeat", "%s must be below half of pull_hold (%s)", n.PullHeartbeat, n.PullHold)
	}
	for q, qb := range n.Queues {
		if qb.Stream == "" {
			fail(p+".queues."+q+".stream", "must not be empty")
		}
	}
}

package azure

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Encoding is how a message body maps to Azure's message text.
type Encoding string

const (
	// EncodingBase64 stores the body base64-encoded (standard alphabet, padded): the Azure
	// Functions queue trigger's default, and the only encoding that carries binary bodies.
	EncodingBase64 Encoding = "base64"
	// EncodingText stores the body as-is. Bodies must be valid UTF-8 made of characters XML
	// allows, since Azure carries message text inside XML.
	EncodingText Encoding = "text"
)

// Azure's limit on the message text, after encoding.
const maxMessageText = 64 << 10

// RetryOptions tune azcore's retry policy, which retries transient faults (HTTP 408, 429,
// 500, 502, 503, 504, timeouts, refused or reset connections) with exponential back-off and
// jitter. Every attempt that reaches storage is counted as a transaction.
type RetryOptions struct {
	// MaxRetries is the number of retries after the first attempt; zero means 3, negative
	// means no retries.
	MaxRetries int
	// RetryDelay is the first back-off delay, doubled on each retry; zero means 800ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off delay; zero means 8s.
	MaxRetryDelay time.Duration
	// TryTimeout bounds one attempt so a hung connection cannot block a worker; zero means 30s.
	TryTimeout time.Duration
}

// Options configure a Backend. Exactly one credential source must be set: ConnectionString,
// AccountName with AccountKey, SASURL, or DefaultCredential. Secrets (keys, SAS signatures)
// never appear in errors or logs of this package.
type Options struct {
	// ConnectionString is a storage connection string ("DefaultEndpointsProtocol=...;
	// AccountName=...;AccountKey=...;QueueEndpoint=..." or with SharedAccessSignature=...).
	// "UseDevelopmentStorage=true" selects Azurite's development account on its default port.
	ConnectionString string
	// AccountName is the storage account, used with AccountKey (shared key authorization).
	AccountName string
	// AccountKey is the account's base64 shared key.
	AccountKey string
	// ServiceURL is the queue service endpoint. Optional with AccountName (default
	// https://<account>.queue.core.windows.net/; Azurite: http://127.0.0.1:10001/devstoreaccount1),
	// required with DefaultCredential.
	ServiceURL string
	// SASURL is a service URL carrying a shared access signature
	// ("https://<account>.queue.core.windows.net/?sv=...&sig=...").
	SASURL string
	// DefaultCredential authorizes with Microsoft Entra ID through azidentity's default chain
	// (environment, workload identity, managed identity, Azure CLI, ...) at ServiceURL.
	DefaultCredential bool

	// Encoding maps bodies to message text; empty means EncodingBase64.
	Encoding Encoding
	// CreateQueues creates a queue the first time an operation finds it missing, so a
	// <queue>-poison queue appears with the first dead letter. Without it, Open fails for a
	// queue that does not exist.
	CreateQueues bool
	// PoisonTTL is the time to live of messages sent to a <queue>-poison queue without an
	// explicit TTL. Zero means they never expire (Functions' poison copies expire after 7 days).
	PoisonTTL time.Duration
	// PoisonFormat is how dead letters are stored: PoisonEnvelope (empty: the default) or
	// PoisonRaw, the original body alone as Functions stores it.
	PoisonFormat PoisonFormat
	// Retry tunes the transient-fault retries.
	Retry RetryOptions
	// HTTPClient sends the requests (a proxy, custom TLS, a test's fault injector); nil
	// means a pooled client sized for many concurrent workers.
	HTTPClient *http.Client
	// Logger receives warnings (undecodable messages moved to poison queues); nil means
	// slog.Default().
	Logger *slog.Logger
}

// Azurite's well-known development account; public, documented by Microsoft.
const (
	devAccountName = "devstoreaccount1"
	devAccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	devServiceURL  = "http://127.0.0.1:10001/devstoreaccount1"
)

// authKind is the chosen credential source.
type authKind int

const (
	authSharedKey authKind = iota
	authSAS
	authDefault
)

// resolved is Options after validation: one credential source, a service URL, the secrets
// to scrub from error text.
type resolved struct {
	kind       authKind
	serviceURL string // for SAS: with the query string
	account    string
	key        string
	secrets    []string
}

func (o *Options) resolve() (resolved, error) {
	var set []string
	if o.ConnectionString != "" {
		set = append(set, "ConnectionString")
	}
	if o.AccountName != "" || o.AccountKey != "" {
		set = append(set, "AccountName+AccountKey")
	}
	if o.SASURL != "" {
		set = append(set, "SASURL")
	}
	if o.DefaultCredential {
		set = append(set, "DefaultCredential")
	}
	switch len(set) {
	case 0:
		return resolved{}, fmt.Errorf("azure: no credentials: set one of Options.ConnectionString, Options.AccountName with Options.AccountKey, Options.SASURL or Options.DefaultCredential")
	case 1:
	default:
		return resolved{}, fmt.Errorf("azure: Options.%s are all set: choose one credential source", strings.Join(set, ", Options."))
	}
	switch o.Encoding {
	case "", EncodingBase64, EncodingText:
	default:
		return resolved{}, fmt.Errorf("azure: Options.Encoding %q: want %q or %q", o.Encoding, EncodingBase64, EncodingText)
	}
	if err := checkPoisonFormat(o.PoisonFormat); err != nil {
		return resolved{}, err
	}
	if o.PoisonTTL < 0 {
		return resolved{}, fmt.Errorf("azure: Options.PoisonTTL %s is negative (zero means never expire)", o.PoisonTTL)
	}
	switch {
	case o.ConnectionString != "":
		return parseConnectionString(o.ConnectionString)
	case o.SASURL != "":
		return parseSASURL("Options.SASURL", o.SASURL)
	case o.DefaultCredential:
		if o.ServiceURL == "" {
			return resolved{}, fmt.Errorf("azure: Options.ServiceURL is required with Options.DefaultCredential")
		}
		u, err := checkServiceURL("Options.ServiceURL", o.ServiceURL)
		if err != nil {
			return resolved{}, err
		}
		return resolved{kind: authDefault, serviceURL: u}, nil
	}
	if o.AccountName == "" {
		return resolved{}, fmt.Errorf("azure: Options.AccountName is required with Options.AccountKey")
	}
	if o.AccountKey == "" {
		return resolved{}, fmt.Errorf("azure: Options.AccountKey is required with Options.AccountName %q", o.AccountName)
	}
	r, err := sharedKey("Options.AccountKey", o.AccountName, o.AccountKey)
	if err != nil {
		return resolved{}, err
	}
	r.serviceURL = "https://" + o.AccountName + ".queue.core.windows.net/"
	if o.ServiceURL != "" {
		if r.serviceURL, err = checkServiceURL("Options.ServiceURL", o.ServiceURL); err != nil {
			return resolved{}, err
		}
	}
	return r, nil
}

func sharedKey(field, account, key string) (resolved, error) {
	if _, err := base64.StdEncoding.DecodeString(key); err != nil {
		// The error names the offset only: the key itself must not reach logs.
		return resolved{}, fmt.Errorf("azure: %s for account %q is not valid base64 (%d characters): %v", field, account, len(key), err)
	}
	return resolved{kind: authSharedKey, account: account, key: key, secrets: []string{key}}, nil
}

func checkServiceURL(field, s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("azure: %s %q: want an http(s) URL such as https://<account>.queue.core.windows.net/", field, redactString(s, nil))
	}
	if u.RawQuery != "" {
		return "", fmt.Errorf("azure: %s has a query string; put a SAS URL in Options.SASURL", field)
	}
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}

func parseSASURL(field, s string) (resolved, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return resolved{}, fmt.Errorf("azure: %s is not an http(s) URL", field)
	}
	q := u.Query()
	sig := q.Get("sig")
	if sig == "" {
		return resolved{}, fmt.Errorf("azure: %s has no sig= parameter: not a shared access signature URL", field)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return resolved{kind: authSAS, serviceURL: u.String(), secrets: []string{sig, url.QueryEscape(sig), u.RawQuery}}, nil
}

// parseConnectionString reads the keys azqueue understands. Errors never quote the string.
func parseConnectionString(cs string) (resolved, error) {
	const field = "Options.ConnectionString"
	kv := map[string]string{}
	for i, part := range strings.Split(strings.TrimRight(strings.TrimSpace(cs), ";"), ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return resolved{}, fmt.Errorf("azure: %s: part %d is not key=value", field, i+1)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if strings.EqualFold(kv["UseDevelopmentStorage"], "true") {
		r, err := sharedKey(field, devAccountName, devAccountKey)
		r.serviceURL = devServiceURL + "/"
		return r, err
	}
	account := kv["AccountName"]
	endpoint := kv["QueueEndpoint"]
	if endpoint == "" {
		if account == "" {
			return resolved{}, fmt.Errorf("azure: %s needs AccountName or QueueEndpoint", field)
		}
		proto := kv["DefaultEndpointsProtocol"]
		if proto == "" {
			proto = "https"
		}
		suffix := kv["EndpointSuffix"]
		if suffix == "" {
			suffix = "core.windows.net"
		}
		endpoint = proto + "://" + account + ".queue." + suffix
	}
	endpoint, err := checkServiceURL(field+" QueueEndpoint", endpoint)
	if err != nil {
		return resolved{}, err
	}
	if key := kv["AccountKey"]; key != "" && account != "" {
		r, err := sharedKey(field+" AccountKey", account, key)
		r.serviceURL = endpoint
		return r, err
	}
	if sas := kv["SharedAccessSignature"]; sas != "" {
		return parseSASURL(field+" SharedAccessSignature", endpoint+"?"+strings.TrimPrefix(sas, "?"))
	}
	return resolved{}, fmt.Errorf("azure: %s needs AccountName with AccountKey, or SharedAccessSignature", field)
}

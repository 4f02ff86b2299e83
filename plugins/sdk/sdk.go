// Package sdk is what a policy plugin author imports. Implement any of listener.Backoff,
// listener.Scaler and listener.PoisonPolicy, and serve them from main:
//
//	func main() {
//		sdk.Serve(sdk.Policies{Scaler: myScaler{}})
//	}
//
// The binary then speaks hashicorp/go-plugin's gRPC protocol with the wqhost.policy.v1
// services (plugins/proto/policy.proto, described in docs/plugins.md). The host starts it,
// so running it by hand only prints a notice.
package sdk

import (
	"context"
	"errors"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/plugins/internal/handshake"
	policyv1 "github.com/wqhost/wqhost/plugins/proto"
)

// ProtocolVersion is the go-plugin application protocol version of wqhost.policy.v1. It
// changes only with an incompatible change of the proto.
const ProtocolVersion = handshake.ProtocolVersion

// MagicCookieKey and MagicCookieValue are the environment variable the host sets when it
// starts a plugin; a plugin run without it refuses to serve. They guard against running a
// random binary as a plugin, not against malice.
const (
	MagicCookieKey   = handshake.MagicCookieKey
	MagicCookieValue = handshake.MagicCookieValue
)

// PluginName is the name of the one go-plugin plugin a policy binary serves.
const PluginName = handshake.PluginName

// Handshake is the go-plugin handshake shared by the host and every policy plugin.
var Handshake = handshake.Config()

// Policies are the policies one plugin binary serves. Any field may be nil; at least one
// must be set.
type Policies struct {
	// Name is shown in the host's status; it defaults to the binary's name.
	Name    string
	Backoff listener.Backoff
	Scaler  listener.Scaler
	Poison  listener.PoisonPolicy
}

// ErrNoPolicy is returned by Validate when Policies holds no policy.
var ErrNoPolicy = errors.New("sdk: no policy to serve (set Backoff, Scaler or Poison)")

// Validate reports whether p can be served.
func (p Policies) Validate() error {
	if p.Backoff == nil && p.Scaler == nil && p.Poison == nil {
		return ErrNoPolicy
	}
	return nil
}

// Serve serves p over go-plugin's gRPC protocol until the host goes away. It does not
// return under a host; it panics when p holds no policy, since that is a programming error
// in the plugin's main.
func Serve(p Policies) {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &GRPCPlugin{Impl: p}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}

// GRPCPlugin is the go-plugin glue for both sides: the plugin serves Impl, the host gets a
// *Client. Hosts use it in their PluginSet; plugin authors call Serve instead.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is what the plugin serves (unused on the host side).
	Impl Policies
}

// GRPCServer registers the declared policies' services and Capabilities on s.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if err := g.Impl.Validate(); err != nil {
		return err
	}
	policyv1.RegisterCapabilitiesServer(s, capabilitiesServer{p: g.Impl})
	if g.Impl.Backoff != nil {
		policyv1.RegisterBackoffServer(s, backoffServer{impl: g.Impl.Backoff})
	}
	if g.Impl.Scaler != nil {
		policyv1.RegisterScalerServer(s, scalerServer{impl: g.Impl.Scaler})
	}
	if g.Impl.Poison != nil {
		policyv1.RegisterPoisonPolicyServer(s, poisonServer{impl: g.Impl.Poison})
	}
	return nil
}

// GRPCClient returns the host side's *Client over the plugin's connection.
func (g *GRPCPlugin) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return handshake.HostPlugin{}.GRPCClient(ctx, b, c)
}

// Client holds the raw gRPC clients of one plugin connection (host side). Call only the
// services Capabilities declared.
type Client = handshake.Client

type capabilitiesServer struct {
	policyv1.UnimplementedCapabilitiesServer
	p Policies
}

func (c capabilitiesServer) Describe(context.Context, *policyv1.DescribeRequest) (*policyv1.DescribeResponse, error) {
	return &policyv1.DescribeResponse{
		Backoff: c.p.Backoff != nil,
		Scaler:  c.p.Scaler != nil,
		Poison:  c.p.Poison != nil,
		Name:    c.p.Name,
	}, nil
}

type backoffServer struct {
	policyv1.UnimplementedBackoffServer
	impl listener.Backoff
}

func (b backoffServer) Next(ctx context.Context, in *policyv1.IdleState) (*policyv1.NextResponse, error) {
	d, stop := b.impl.Next(ctx, policyv1.ToIdleState(in))
	return &policyv1.NextResponse{DelayNanos: int64(d), Stop: stop}, nil
}

type scalerServer struct {
	policyv1.UnimplementedScalerServer
	impl listener.Scaler
}

func (s scalerServer) Desired(ctx context.Context, in *policyv1.State) (*policyv1.DesiredResponse, error) {
	return &policyv1.DesiredResponse{Workers: int64(s.impl.Desired(ctx, policyv1.ToState(in)))}, nil
}

type poisonServer struct {
	policyv1.UnimplementedPoisonPolicyServer
	impl listener.PoisonPolicy
}

func (p poisonServer) Decide(ctx context.Context, in *policyv1.Failure) (*policyv1.Decision, error) {
	return policyv1.FromDecision(p.impl.Decide(ctx, policyv1.ToFailure(in))), nil
}

// Duration is a helper for plugin authors parsing durations from args or environment:
// it returns def when s is empty or invalid.
func Duration(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && s != "" {
		return d
	}
	return def
}

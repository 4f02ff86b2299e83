// Package handshake is what the host (plugins/external) and the plugin authors' SDK
// (plugins/sdk) share of the wqhost.policy.v1 protocol: the go-plugin handshake, the plugin's
// name, and the host side of the gRPC connection. The host needs nothing else of the SDK.
package handshake

import (
	"context"
	"errors"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	policyv1 "github.com/wqhost/wqhost/plugins/proto"
)

// ProtocolVersion is the go-plugin application protocol version of wqhost.policy.v1. It
// changes only with an incompatible change of the proto.
const ProtocolVersion = 1

// MagicCookieKey and MagicCookieValue are the environment variable the host sets when it
// starts a plugin; a plugin run without it refuses to serve. They guard against running a
// random binary as a plugin, not against malice.
const (
	MagicCookieKey   = "WQHOST_POLICY_PLUGIN"
	MagicCookieValue = "6f1b0d5e-policy-v1"
)

// PluginName is the name of the one go-plugin plugin a policy binary serves.
const PluginName = "policy"

// Config returns the go-plugin handshake of the host and every policy plugin.
func Config() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// Client holds the raw gRPC clients of one plugin connection (host side). Call only the
// services the plugin declared in Capabilities.
type Client struct {
	Capabilities policyv1.CapabilitiesClient
	Backoff      policyv1.BackoffClient
	Scaler       policyv1.ScalerClient
	Poison       policyv1.PoisonPolicyClient
}

// NewClient returns the clients of every wqhost.policy.v1 service over c.
func NewClient(c *grpc.ClientConn) *Client {
	return &Client{
		Capabilities: policyv1.NewCapabilitiesClient(c),
		Backoff:      policyv1.NewBackoffClient(c),
		Scaler:       policyv1.NewScalerClient(c),
		Poison:       policyv1.NewPoisonPolicyClient(c),
	}
}

// HostPlugin is the host's go-plugin glue: Dispense(PluginName) returns a *Client.
type HostPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

// GRPCServer implements plugin.GRPCPlugin; the host serves nothing.
func (HostPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("handshake: the host side serves no policy")
}

// GRPCClient implements plugin.GRPCPlugin.
func (HostPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

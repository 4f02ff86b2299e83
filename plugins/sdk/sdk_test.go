package sdk

import (
	"context"
	"errors"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	policyv1 "github.com/wqhost/wqhost/plugins/proto"
)

type scaler struct{}

func (scaler) Desired(_ context.Context, s listener.State) int { return int(s.Depth) + s.ActiveWorkers }

type poison struct{}

func (poison) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	return outcome.DeadLetter(f.Outcome.Reason() + "@" + f.Message.ID)
}

func TestValidate(t *testing.T) {
	if err := (Policies{}).Validate(); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("empty Policies: %v, want ErrNoPolicy", err)
	}
	if err := (Policies{Scaler: scaler{}}).Validate(); err != nil {
		t.Errorf("scaler only: %v", err)
	}
}

// TestServedOverGRPC drives the served policies through go-plugin's in-memory gRPC pair:
// only the declared services are served, and values survive the round trip.
func TestServedOverGRPC(t *testing.T) {
	ctx := context.Background()
	impl := Policies{Name: "t", Scaler: scaler{}, Poison: poison{}}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: impl}})
	defer client.Close()
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c := raw.(*Client)
	caps, err := c.Capabilities.Describe(ctx, &policyv1.DescribeRequest{})
	if err != nil || caps.GetBackoff() || !caps.GetScaler() || !caps.GetPoison() || caps.GetName() != "t" {
		t.Fatalf("Describe = %v, %v", caps, err)
	}
	w, err := c.Scaler.Desired(ctx, policyv1.FromState(listener.State{Depth: 5, ActiveWorkers: 2, LatencyP99: time.Second}))
	if err != nil || w.GetWorkers() != 7 {
		t.Errorf("Desired = %v, %v, want 7", w, err)
	}
	d, err := c.Poison.Decide(ctx, policyv1.FromFailure(listener.Failure{Message: &queue.Message{ID: "m9"}, Outcome: outcome.Failed(errors.New("boom"))}))
	if err != nil {
		t.Fatal(err)
	}
	if dec, ok := policyv1.ToDecision(d); !ok || dec.Kind != outcome.KindReject || dec.Reason() != "boom@m9" {
		t.Errorf("Decide = %+v (ok %v)", dec, ok)
	}
	if _, err := c.Backoff.Next(ctx, &policyv1.IdleState{Idle: 1}); err == nil {
		t.Error("Backoff.Next answered although the plugin declares no back-off")
	}
}

package main

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
)

func TestDesired(t *testing.T) {
	s := scaler{target: 100 * time.Millisecond}
	tests := []struct {
		name string
		st   listener.State
		want int
	}{
		{"empty queue goes to min", listener.State{MinWorkers: 1, ActiveWorkers: 8}, 1},
		{"backlog under target grows by half", listener.State{Depth: 100, ActiveWorkers: 4, LatencyP99: 50 * time.Millisecond}, 6},
		{"growth capped by backlog", listener.State{Depth: 5, ActiveWorkers: 4, LatencyP99: 50 * time.Millisecond}, 5},
		{"no data yet grows by one", listener.State{Depth: 100, ActiveWorkers: 1}, 2},
		{"twice too slow halves", listener.State{Depth: 100, ActiveWorkers: 8, LatencyP99: 200 * time.Millisecond}, 4},
		{"never below one when over target", listener.State{Depth: 100, ActiveWorkers: 1, LatencyP99: 10 * time.Second}, 1},
		{"backlog below workers keeps them", listener.State{Depth: 2, ActiveWorkers: 4, LatencyP99: 50 * time.Millisecond}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Desired(context.Background(), tt.st); got != tt.want {
				t.Errorf("Desired(%+v) = %d, want %d", tt.st, got, tt.want)
			}
		})
	}
}

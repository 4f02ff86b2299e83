package nats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
)

// An existing stream is checked, not taken on trust: limits retention (handled messages
// would stay) is refused naming the stream, the setting and the fix; fewer replicas than
// configured are raised, or refused when the server cannot (one server has no room for 3);
// adopt_streams takes either as it is.
func TestExistingStreamChecked(t *testing.T) {
	_, url := natstest.Server(t)
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		retention jetstream.RetentionPolicy
		replicas  int
		adopt     bool
		want      []string // in the error; none: opens
	}{
		{"limits retention", jetstream.LimitsPolicy, 1, false, []string{"LIM", "retention is Limits", "workqueue", "adopt_streams"}},
		{"limits retention adopted", jetstream.LimitsPolicy, 1, true, nil},
		{"too few replicas", jetstream.WorkQueuePolicy, 3, false, []string{"R1", "1 replicas, replicas is 3", "raising them failed", "adopt_streams"}},
		{"too few replicas adopted", jetstream.WorkQueuePolicy, 3, true, nil},
		{"work-queue R1", jetstream.WorkQueuePolicy, 1, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stream string
			if tc.retention == jetstream.LimitsPolicy {
				stream = "LIM_" + strings.ReplaceAll(tc.name, " ", "_")
			} else {
				stream = "R1_" + strings.ReplaceAll(tc.name, " ", "_")
			}
			subject := "user." + strings.ReplaceAll(tc.name, " ", "_")
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Retention: tc.retention, Storage: jetstream.MemoryStorage}); err != nil {
				t.Fatal(err)
			}
			b, err := wqnats.Open(ctx, wqnats.Options{URLs: []string{url}, Replicas: tc.replicas, AdoptStreams: tc.adopt,
				Queues: map[string]wqnats.QueueBinding{"jobs": {Stream: stream}}, AckWait: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.Queue(ctx, "jobs")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("open: %v; want the stream used", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("stream %s (%s retention, R1, replicas %d) opened; want it refused", stream, tc.retention, tc.replicas)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

package drain

import (
	"context"
	"testing"
	"time"
)

// TestEachSystemDrainsAll checks every system does the same job: the whole backlog handled
// and gone from the store (each Run checks its store is empty), with its round trips
// counted.
func TestEachSystemDrainsAll(t *testing.T) {
	for _, s := range Systems {
		t.Run(s.Name, func(t *testing.T) {
			res, err := s.Run(context.Background(), Options{Dir: t.TempDir(), Messages: 300, Workers: 4, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != 300 || res.MsgPerSec <= 0 || res.CallsPerMsg <= 0 || res.Durability == "" {
				t.Errorf("result %+v: want 300 messages, a rate, round trips and a durability setting", res)
			}
		})
	}
}

// TestCommitsCounted checks the commit hook counts the commits of the file it names: the
// local store's and River's commits per message are read from it.
func TestCommitsCounted(t *testing.T) {
	for _, run := range []func(context.Context, Options) (Result, error){Local, River} {
		res, err := run(context.Background(), Options{Dir: t.TempDir(), Messages: 200, Workers: 4, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.CommitsPerMsg <= 0 || res.CommitsPerMsg > 10 {
			t.Errorf("%s: %.3f commits per message, want a count above 0", res.System, res.CommitsPerMsg)
		}
	}
}

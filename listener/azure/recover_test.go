package azure_test

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// TestRecoveredAfterStorageReturns: the channel a backing-off listener waits on stays open
// while storage is down and closes soon after it answers again, so the listener's error
// back-off (doubling up to a minute) ends when storage is back, not when it runs out.
func TestRecoveredAfterStorageReturns(t *testing.T) {
	server(t) // skip early when Azurite is unavailable
	s := azuritetest.Start(t)
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "recovered")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	ch := q.Recovered()
	select {
	case <-ch:
		t.Fatal("Recovered closed while storage was down")
	case <-time.After(3 * time.Second): // three probes, none answered
	}
	if err := s.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	select {
	case <-ch:
		t.Logf("recovered %s after storage restarted", time.Since(back).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("Recovered still open 30s after storage restarted")
	}
}

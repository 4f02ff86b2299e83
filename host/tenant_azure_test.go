package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// TestTenantNamesCannotCollideOnAzure, on Azurite: under the old "<tenant>-<queue>" names a
// guest of the default tenant emitting "acme-orders" wrote into tenant acme's queue orders,
// and tenant x emitting "y-jobs" into tenant x-y's queue jobs. Now each emit lands in the
// emitter's own queue of that name (read with Microsoft's client by its physical name) and
// nothing reaches the other tenant's queues or binding; an emit to a "-poison" queue is
// refused and the message dead-lettered with ERR_DENIED.
func TestTenantNamesCannotCollideOnAzure(t *testing.T) {
	az := azuritetest.Start(t)
	t.Setenv("WQHOST_TEST_AZURITE", az.ConnectionString())
	guest := abs(t, "../runtime/testdata/guest/guest.wasm")
	b := func(queue string) string {
		return fmt.Sprintf("      guest:\n        backend: az\n        queue: %s\n        module: %q\n%s", queue, guest, fast)
	}
	h, _ := newHostWith(t, "backends:\n  az: {type: azure, connection_string_env: WQHOST_TEST_AZURITE, create_queues: true}\n",
		"  default:\n    bindings:\n"+b("inbox")+
			"  acme:\n    bindings:\n"+b("orders")+
			"  x:\n    bindings:\n"+b("inbox")+
			"  x-y:\n    bindings:\n"+b("jobs"))
	stop := run(t, h)
	send(t, h, "default", "inbox", "emitto:acme-orders", "emitto:inbox-poison")
	send(t, h, "x", "inbox", "emitto:y-jobs")

	sc, err := azqueue.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// count reads a queue by its physical name, as any Azure client would.
	count := func(physical string) int32 {
		p, err := sc.NewQueueClient(physical).GetProperties(context.Background(), nil)
		if err != nil {
			return -1 // not created (yet)
		}
		return *p.ApproximateMessagesCount
	}
	eventually(t, "default's emit in its own acme-orders", func() bool { return count("acme-orders") == 1 })
	eventually(t, "x's emit in its own y-jobs (1-x-y-jobs)", func() bool { return count("1-x-y-jobs") == 1 })
	eventually(t, "default's forged dead letter refused and dead-lettered", func() bool { return count("inbox-poison") == 1 })
	eventually(t, "counters", func() bool {
		return bindingStatus(t, h, "default", "guest").Processed == 1 && bindingStatus(t, h, "x", "guest").Processed == 1
	})
	for _, v := range []struct{ tenant, physical string }{{"acme", "4-acme-orders"}, {"acme", "4-acme-orders-poison"}, {"x-y", "3-x-y-jobs"}, {"x-y", "3-x-y-jobs-poison"}} {
		if n := count(v.physical); n > 0 {
			t.Errorf("tenant %s's queue %s holds %d messages emitted by another tenant", v.tenant, v.physical, n)
		}
		if s := bindingStatus(t, h, v.tenant, "guest"); s.Processed+s.Failed != 0 {
			t.Errorf("tenant %s's binding handled %d messages of another tenant", v.tenant, s.Processed+s.Failed)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dls, err := ListDeadLetters(context.Background(), h.Config(), "default", "inbox", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Reason != "rejected: emit=-2" {
		t.Errorf("dead letters of default/inbox = %+v; want the forged-poison emit refused with emit=-2", dls)
	}
}

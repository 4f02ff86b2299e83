package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/adminqueue"
)

// jobRunner holds the admin API's background jobs (dead-letter redrives) with the context
// that stops them when the host closes.
type jobRunner struct {
	jobs   *adminqueue.Jobs
	cancel context.CancelFunc
}

func newJobs() jobRunner {
	ctx, cancel := context.WithCancel(context.Background())
	return jobRunner{jobs: adminqueue.NewJobs(ctx), cancel: cancel}
}

// stop cancels the running jobs and waits for them, before the backends they use close.
func (j jobRunner) stop() {
	if j.jobs == nil {
		return
	}
	j.cancel()
	j.jobs.Wait()
}

var (
	_ admin.QueueHost      = adminHost{}
	_ admin.DepthRefresher = adminHost{}
)

// Queues opens tenant's queue and its dead letters on the host's own backends for the
// admin API's message and dead-letter endpoints.
func (a adminHost) Queues(ctx context.Context, tenant, queue string) (admin.Queues, error) {
	base := strings.TrimSuffix(queue, config.PoisonSuffix)
	q, err := a.h.OpenQueue(ctx, tenant, queue)
	if err != nil {
		return admin.Queues{}, err
	}
	dead, err := a.h.OpenQueue(ctx, tenant, base+config.PoisonSuffix)
	if err != nil {
		return admin.Queues{}, err
	}
	t, ok := a.h.live.Load().Tenants[tenant]
	if !ok {
		return admin.Queues{}, fmt.Errorf("tenant %q: %w", tenant, config.ErrNotConfigured)
	}
	return admin.Queues{Queue: q, Dead: dead, MaxMessageBytes: int64(t.Limits.MaxMessageBytes)}, nil
}

// Jobs is where the admin API's redrives run.
func (a adminHost) Jobs() *adminqueue.Jobs { return a.h.jobs.jobs }

// maxSendBytes is the admin API's limit on a send's request body: the largest tenant
// limits.max_message_bytes, base64 in JSON, with 64 KiB to spare.
func maxSendBytes(cfg *config.Config) int64 {
	var m int64
	for _, t := range cfg.Tenants {
		m = max(m, int64(t.Limits.MaxMessageBytes))
	}
	return m/3*4 + 64<<10
}

// RefreshDepths has the listeners of tenant's bindings that read queue read its depths
// again (after a purge or redrive through the admin API), so that the status shows them
// fresh.
func (a adminHost) RefreshDepths(ctx context.Context, tenant, queue string) {
	for _, b := range a.h.bindings() {
		if b.tenant.name == tenant && b.reads(queue) {
			b.lis.RefreshDepths(ctx)
		}
	}
}

package adminqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Job states.
const (
	JobRunning   = "running"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// JobStatus is what GET /v1/jobs/{id} answers.
type JobStatus struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Tenant   string    `json:"tenant"`
	Queue    string    `json:"queue"`
	State    string    `json:"state"`
	Matched  int64     `json:"matched"`
	Done     int64     `json:"done"`
	Failed   int64     `json:"failed"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// Jobs runs background operations (redrives) for the admin API and keeps their status:
// every running job and the last KeepFinished finished ones. Their contexts derive from the
// one Jobs was made with, so a host's close cancels them.
type Jobs struct {
	ctx context.Context

	mu   sync.Mutex
	jobs map[string]*job
	done []string // finished jobs' ids, oldest first
	wg   sync.WaitGroup
}

// KeepFinished is how many finished jobs Jobs keeps for GET /v1/jobs/{id}.
const KeepFinished = 100

type job struct {
	st     JobStatus // ID, Kind, Tenant, Queue, Started: fixed; the rest under Jobs.mu
	p      Progress
	cancel context.CancelFunc
}

// NewJobs returns a job registry whose jobs stop when ctx ends.
func NewJobs(ctx context.Context) *Jobs {
	return &Jobs{ctx: ctx, jobs: map[string]*job{}}
}

// Start runs fn in the background as a job of tenant's queue and returns its id (random,
// not guessable). fn counts into the Progress it is given.
func (j *Jobs) Start(kind, tenant, queue string, fn func(ctx context.Context, p *Progress) error) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	ctx, cancel := context.WithCancel(j.ctx)
	jb := &job{st: JobStatus{ID: hex.EncodeToString(b[:]), Kind: kind, Tenant: tenant, Queue: queue, State: JobRunning, Started: time.Now().UTC()}, cancel: cancel}
	j.mu.Lock()
	j.jobs[jb.st.ID] = jb
	j.mu.Unlock()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer cancel()
		err := fn(ctx, &jb.p)
		j.mu.Lock()
		defer j.mu.Unlock()
		switch {
		case jb.st.State == JobCancelled:
		case err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil:
			jb.st.State, jb.st.Error = JobCancelled, "stopped: the host is shutting down"
		case err != nil:
			jb.st.State, jb.st.Error = JobFailed, err.Error()
		default:
			jb.st.State = JobDone
		}
		jb.st.Finished = time.Now().UTC()
		j.done = append(j.done, jb.st.ID)
		if len(j.done) > KeepFinished {
			delete(j.jobs, j.done[0])
			j.done = j.done[1:]
		}
	}()
	return jb.st.ID
}

// Get returns a job's status; false when there is no such job (or it finished long ago).
func (j *Jobs) Get(id string) (JobStatus, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	jb, ok := j.jobs[id]
	if !ok {
		return JobStatus{}, false
	}
	st := jb.st
	st.Matched, st.Done, st.Failed = jb.p.Matched.Load(), jb.p.Done.Load(), jb.p.Failed.Load()
	return st, true
}

// Cancel stops a running job (it ends as cancelled) and returns its status; a finished one
// keeps its state. False when there is no such job.
func (j *Jobs) Cancel(id string) (JobStatus, bool) {
	j.mu.Lock()
	jb, ok := j.jobs[id]
	if ok && jb.st.State == JobRunning {
		jb.st.State = JobCancelled
		jb.cancel()
	}
	j.mu.Unlock()
	if !ok {
		return JobStatus{}, false
	}
	return j.Get(id)
}

// Wait waits for every job to end (after the context Jobs was made with ended, or each
// was cancelled).
func (j *Jobs) Wait() { j.wg.Wait() }

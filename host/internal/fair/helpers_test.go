package fair

// tenant registers a tenant; weight < 1 counts as 1, maxConcurrency 0 means no cap.
func (s *Scheduler) tenant(name string, weight, maxConcurrency int) *Share {
	t := s.NewShare(name, weight, maxConcurrency)
	s.Add(t)
	return t
}

// request is the default binding's request.
func (t *Share) request() *waiter { return t.def.request() }

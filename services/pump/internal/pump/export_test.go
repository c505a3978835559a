package pump

// Idle reports whether no read ahead is in flight: what the last one read is kept by then, so
// a test can wait for it instead of sleeping past it.
func (a *ReadAhead) Idle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.running
}

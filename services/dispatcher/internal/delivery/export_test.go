package delivery

// OnOrderedRound has fn told each time an Ordered lane finished a round and waits for a
// wake-up or its poll, so a test can act between rounds instead of sleeping past one. Call it
// before Run.
func (d *Dispatcher) OnOrderedRound(fn func(target string)) { d.roundDone = fn }

package pgfence

// Highest is the highest timeline seen of the cluster sysid (0: none).
func (f *Fence) Highest(sysid string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest[sysid]
}

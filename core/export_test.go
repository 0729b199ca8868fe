package slidelog

// BreakerStates returns the state of the breaker of every store node l
// has used, by node address ("store" for a store without nodes).
func BreakerStates(l *Limiter) map[string]string {
	out := make(map[string]string)
	if l.breakers == nil {
		return out
	}
	for n, st := range l.breakers.states() {
		out[nodeLabel(n)] = breakerState(st).String()
	}
	return out
}

// OnMemory reports whether l decides on its memory store's logs itself
// (Limiter.memory) rather than through the store's Take.
func OnMemory(l *Limiter) bool { return l.memory != nil }

// Namespace returns the namespace l gives its store with every key
// (Request.Namespace).
func Namespace(l *Limiter) string { return l.namespace }

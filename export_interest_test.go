package petrel

// SetLearnedInterestBound lowers, for a test, the interest n keeps for
// its neighbours (maxLearnedInterest), under the locks its readers take.
func SetLearnedInterestBound(n *Node, max int) {
	it := &n.topics.remote
	it.changeMu.Lock()
	defer it.changeMu.Unlock()
	it.mu.Lock()
	defer it.mu.Unlock()
	it.max = max
}

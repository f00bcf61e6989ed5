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

// SetAdminLeaseBound sets, for a test, how many answers of the admin API
// may wait for POST /api/settle (maxAdminLeases), and returns the bound
// it replaced.
func SetAdminLeaseBound(max int) int {
	old := maxAdminLeases
	maxAdminLeases = max
	return old
}

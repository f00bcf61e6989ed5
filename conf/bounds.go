package conf

// boundKeys are the top-level keys that bound resources outside any
// section: max_auto_queues, max_subscriptions_per_identity.
type boundKeys struct{ f *File }

func (k boundKeys) check(c *checker, _ string) {
	c.atLeast("max_auto_queues", int64(k.f.MaxAutoQueues), 1)
	c.atLeast("max_subscriptions_per_identity", int64(k.f.MaxSubscriptionsPerIdentity), 1)
}

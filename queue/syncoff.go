package queue

// syncOffForTest forces SQLite's synchronous=OFF whatever the configured
// mode: no fsync at all. Only a binary built with the petrel_testknobs tag
// can set it (syncoff_knob.go), for the mutation check of the power-loss
// tests, which must fail under it.
var syncOffForTest bool

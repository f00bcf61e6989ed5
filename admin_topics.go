package petrel

import (
	"net/http"

	"github.com/petrelmq/petrel/internal/adminapi"
)

// The admin API's topic endpoint (see routes for the others):
//
//	GET /api/topics                 → adminapi.Topics: the topic spaces, the
//	                                  subscriptions, and what waits toward
//	                                  each neighbour
func (s *adminServer) handleTopics(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.node.topicsResponse())
}

func (n *Node) topicsResponse() adminapi.Topics {
	r := adminapi.Topics{Spaces: []string{}, Subscriptions: []adminapi.Subscription{}, Forwards: []adminapi.Forward{}}
	for _, s := range n.topics.spaces {
		r.Spaces = append(r.Spaces, s.String())
	}
	for _, s := range n.Subscriptions() {
		r.Subscriptions = append(r.Subscriptions, adminapi.Subscription(s))
	}
	for _, f := range n.forwardQueues() {
		st := f.q.Stats()
		r.Forwards = append(r.Forwards, adminapi.Forward{Neighbour: f.neighbour, Queue: f.q.Name(), Depth: st.Depth,
			MaxQueued: n.cfg.TopicForwardMaxQueued, Overflowed: st.Overflowed})
	}
	return r
}

package petrel

import "net/http"

// The admin API's topic endpoints (see adminAPI for the others):
//
//	GET /api/topics                 → TopicsResponse: the topic spaces and
//	                                  the subscriptions
func (n *Node) adminTopics(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/topics", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, n.topicsResponse())
	})
}

// TopicsResponse answers GET /api/topics.
type TopicsResponse struct {
	// Spaces are the declared topic spaces' patterns.
	Spaces        []string           `json:"spaces"`
	Subscriptions []SubscriptionInfo `json:"subscriptions"`
}

func (n *Node) topicsResponse() TopicsResponse {
	r := TopicsResponse{Spaces: []string{}, Subscriptions: n.Subscriptions()}
	for _, s := range n.topics.spaces {
		r.Spaces = append(r.Spaces, s.String())
	}
	return r
}

package adminapi

import (
	"net/url"
	"path/filepath"
	"strconv"
)

// SocketName is the name of the admin socket in a node's data directory.
// It asks no token: reaching it takes the node's user.
const SocketName = "petrel.sock"

// SocketPath is the admin socket of the node whose data directory is dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// The endpoints, as the node routes them ("{name}" is a parameter) and
// the client calls them:
//
//	GET  /healthz                   200 "ok" while the process serves
//	GET  /readyz                    200 "ready" once the node started; 503 before and while stopping,
//	                                and once the link listener or an MQTT listener stopped accepting connections ("not ready: " why)
//	GET  /metrics                   Prometheus text, from the node's own registry
//	GET  /api/status                petrel.Status (also at /status, for older clients)
//	POST /api/send                  SendRequest → SendResponse, once the message is durable
//	POST /api/recv                  RecvRequest → RecvResponse
//	POST /api/subscribe             SubscribeRequest → RecvResponse
//	POST /api/settle                SettleRequest → SettleResponse: settles a SettleLater answer's messages (404 once its lease is gone)
//	POST /api/topics/subscriptions/{name}/delete  → CountResponse: deletes the durable subscription and the messages it held (404 for no durable subscription of that name)
//	GET  /api/queues                → []petrel.QueueStats, by name
//	POST /api/queues/{queue}/purge  → CountResponse: the messages deleted
//	GET  /api/queues/{queue}/messages?limit=N&after=K  → []Message, in delivery order after the message of key K (default: from the first), consuming nothing (limit default 100, at most 1000; HeaderNextAfter and a Link rel="next" when the queue holds more; offset=M, the older form, skips M messages by reading them)
//	GET  /api/dlq/{addr}?limit=N    → DeadLettersResponse, consuming nothing
//	POST /api/dlq/{addr}/replay     ReplayRequest (none: all; select: those named) → CountResponse: the messages moved back
//	POST /api/dlq/{addr}/purge      → CountResponse: the dead letters deleted
//	POST /api/files                 SendFileRequest → SendFileResponse, once durable
//	GET  /api/files/{id}            FileProgress of a file sent from the node
//
// An error answers {"error": "..."} (ErrorResponse): 400 for a malformed
// request or an invalid message, 401 without the token, 403 for a refused
// Host, Origin or file, 404 for an unknown queue or address, 409 for an
// address that cannot do what was asked (not a receive address, no
// route), 415 for a POST that is not JSON, 503 while the node closes,
// when its store is full, or when too many answers wait for POST
// /api/settle.
const (
	PathHealthz     = "/healthz"
	PathReadyz      = "/readyz"
	PathMetrics     = "/metrics"
	PathStatus      = "/api/status"
	PathStatusOld   = "/status"
	PathSend        = "/api/send"
	PathRecv        = "/api/recv"
	PathQueues      = "/api/queues"
	PathQueuePurge  = "/api/queues/{queue}/purge"
	PathQueueBrowse = "/api/queues/{queue}/messages"
	PathDeadLetters = "/api/dlq/{addr}"
	PathReplay      = "/api/dlq/{addr}/replay"
	PathDLQPurge    = "/api/dlq/{addr}/purge"
	PathFiles       = "/api/files"
	PathFile        = "/api/files/{id}"
	PathTopics      = "/api/topics"
	PathSubscribe   = "/api/subscribe"
	PathSettle      = "/api/settle"
	// PathUnsubscribe deletes a durable subscription, whoever made it: a
	// remote client has no way to delete its own.
	PathUnsubscribe = "/api/topics/subscriptions/{name}/delete"
)

// The parameters of the paths above.
const (
	ParamQueue = "queue"
	ParamAddr  = "addr"
	ParamName  = "name"
	ParamID    = "id"
	// ParamLimit is the query parameter of PathDeadLetters and
	// PathQueueBrowse.
	ParamLimit = "limit"
	// ParamAfter is the query parameter of PathQueueBrowse: the key of
	// the message to start after, as HeaderNextAfter names it.
	ParamAfter = "after"
	// ParamOffset is the query parameter of PathQueueBrowse: how many
	// messages, in delivery order, to skip. The node reads every one of
	// them to find where to start: prefer ParamAfter.
	ParamOffset = "offset"
)

// MaxAnswerBytes bounds the messages of one answer of PathRecv,
// PathSubscribe and PathQueueBrowse: the bytes of the messages as stored,
// past the first, which comes whatever its size. An answer that stops
// there says so: RecvResponse.More, or HeaderNextOffset for a browse.
const MaxAnswerBytes = 8 << 20

// HeaderNextOffset is set on an answer of PathQueueBrowse, for a request
// without ParamAfter, that stopped before its limit because the next
// message did not fit in MaxAnswerBytes: the offset to ask for next. It
// stays for the clients of offsets; HeaderNextAfter names every next page. The answer is a JSON array,
// which has no room for the flag; an answer without the header ended at
// its limit or at the end of the queue.
const HeaderNextOffset = "Petrel-Next-Offset"

// HeaderNextAfter is set on an answer of PathQueueBrowse after whose last
// message the queue held more, whether the answer stopped at its limit or
// at MaxAnswerBytes: the ParamAfter of the next page. It is the message's
// key, "priority:id", its place in the delivery order, which the node
// seeks to along an index: a page deep in a queue costs what the first
// does. The answer's Link header (rel="next") is that next page's path.
// Following it, every message the queue held throughout comes once, in
// delivery order; one put or released meanwhile comes if its place is
// after the page it lands beside.
const HeaderNextAfter = "Petrel-Next-After"

// QueueBrowsePath is PathQueueBrowse for the queue name, limit messages
// (0: the node's default) after the message of key after ("" from the
// first).
func QueueBrowsePath(name string, limit int, after string) string {
	v := url.Values{}
	if limit > 0 {
		v.Set(ParamLimit, strconv.Itoa(limit))
	}
	if after != "" {
		v.Set(ParamAfter, after)
	}
	p := PathQueues + "/" + url.PathEscape(name) + "/messages"
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	return p
}

// UnsubscribePath is PathUnsubscribe for the subscription name.
func UnsubscribePath(name string) string {
	return PathTopics + "/subscriptions/" + url.PathEscape(name) + "/delete"
}

// QueuePurgePath is PathQueuePurge for the queue name.
func QueuePurgePath(name string) string { return PathQueues + "/" + url.PathEscape(name) + "/purge" }

// DeadLettersPath is PathDeadLetters for addr; action "" browses them,
// "replay" or "purge" is PathReplay or PathDLQPurge.
func DeadLettersPath(addr, action string) string {
	p := "/api/dlq/" + url.PathEscape(addr)
	if action != "" {
		p += "/" + action
	}
	return p
}

// FilePath is PathFile for the file message id.
func FilePath(id uint64) string { return PathFiles + "/" + strconv.FormatUint(id, 10) }

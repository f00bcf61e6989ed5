// Package mqttgw is the node's MQTT front door: an MQTT 3.1.1 and 5
// listener (github.com/mochi-mqtt/server/v2, which owns the protocol)
// whose publishes and subscriptions are Petrel topics.
//
// Invariants:
//   - mochi never routes a message itself. Every publish is handed to the
//     Backend (the node) and acknowledged (PUBACK, PUBREC) only once the
//     Backend says it is committed; every delivery comes from a Petrel
//     subscription, and its Petrel lease is acked only on the client's
//     PUBACK or PUBCOMP.
//   - A topic name from the wire is data: it is mapped (topic.go) to a
//     Petrel name or refused, never used as a path or a table name.
//   - Every goroutine started here is stopped by Gateway.Close.
//   - What MQTT keeps beyond the node's queues is in mqtt.db (store.go):
//     retained messages, persistent sessions and their filters, and wills
//     waiting for their delay (will.go). The PUBRECs of QoS 2 publishes
//     awaiting PUBREL are marks in the node's store, committed with
//     their messages (qos2.go). A shared subscription's group is a
//     durable Petrel subscription (share.go).
//
// It must not import the module root: the root wires a Gateway to its
// node through the Backend interface.
package mqttgw

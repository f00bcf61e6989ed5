// Package message defines what Petrel stores and forwards: the Message type
// with its header, kind properties, typed application properties and body;
// the binary codec that carries it between nodes and into the store; node
// ids and message ids; destination syntax; and validation against limits.
//
// Every other Petrel package imports message, so message imports only the
// standard library. It must never import another Petrel package or a
// third-party module.
//
// # Invariants
//
//   - (Origin, ID) is globally unique: Origin is a random 128-bit NodeID and
//     IDGen issues strictly increasing ids per node, across restarts and
//     backward clock steps. Queues deduplicate on that pair.
//   - Application property values keep their exact type and bits across the
//     wire: an int16 stays an int16, a float NaN keeps its payload.
//   - The codec is canonical. Decode accepts exactly one encoding per message,
//     so decode→encode gives back the same bytes, and decode→encode→decode
//     gives a Message equal under reflect.DeepEqual. Empty Body and empty
//     Properties decode as nil; a non-zero Timestamp decodes in UTC.
//   - Decode treats its input as hostile. It checks every length against the
//     bytes that remain and against Limits before it allocates anything,
//     rejects trailing bytes, and never panics.
//   - Anything that passes Validate can be encoded, and anything AppendBinary
//     encodes decodes again under limits large enough to hold it.
//
// # Memory of decoded messages
//
// Decode copies all strings of a message (destination, kind properties,
// property keys and string or bytes values) into one allocation, and the body
// into another. Holding any one string keeps the others' bytes alive, but
// never the body. The input slice is not retained.
package message

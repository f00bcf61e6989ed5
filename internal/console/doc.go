// Package console is the operators' web console: HTML pages served by a
// node's admin listener at "/", drawn from the same figures as the JSON
// API (petrel.Status, the queue figures, the topics), kept live by one
// server-sent-events stream per open page.
//
// Invariants:
//   - Everything it serves is embedded (templates/ and static/): no CDN, no
//     build step, no inline script or style, so that the
//     Content-Security-Policy it sends can forbid both.
//   - It changes nothing itself: the pages' buttons call the JSON API
//     (send, purge, replay), which the admin guard lets a logged-in browser
//     reach with its session cookie only when the request also carries the
//     CSRF token (Server.Session, Server.CSRFValid).
//   - It must not import the root package, which imports it: the node
//     reaches it through Source.
//   - Its goroutines (the sampler, one per event stream) end on Close.
package console

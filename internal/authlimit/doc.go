// Package authlimit slows down the guessing of a secret over the network:
// it counts the failed checks of each remote address and, past a burst,
// refuses to check that address's secrets again until its count has
// drained.
//
// Invariants:
//   - Its memory is bounded (Limiter.MaxKeys addresses); past the bound,
//     the addresses it has no room for share one count, so that many
//     addresses buy an attacker no more guesses than one does.
//   - It starts no goroutine: stale addresses are swept when room is
//     needed.
//   - It imports nothing of the module.
package authlimit

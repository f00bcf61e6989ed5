// Package petreltest is the test toolkit that every package's tests share,
// in the manner of bbolt's internal/btesting: one wait helper instead of one
// per file. Its sub-package nodes opens nodes of the root package for the
// root's and the command's tests, and checks their invariants when each
// test ends.
//
// Invariants:
//   - Eventually never sleeps longer than it must: it returns as soon as its
//     condition holds, and its bound, Patience, matters only when the test
//     fails. Timings are never asserted.
//   - Eventually works inside a testing/synctest bubble, where its polls move
//     the fake clock.
//
// petreltest imports only the standard library, so that the tests of every
// package (queue, filetransfer, conf, the root, cmd) may use it without an
// import cycle. Helpers that need the root package live in nodes.
package petreltest

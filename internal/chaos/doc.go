// Package chaos holds the parts of `petrel chaos` that need no node: the
// checker that compares what producers were told was durable with what the
// stores hold, and the fault-injecting network of proxies between the
// nodes (Shopify's toxiproxy, embedded as a library: no toxiproxy server).
//
// Invariants:
//   - A key is <producer>.<incarnation>[t]-<priority>-<n>, as `petrel bench
//     agent produce --keys-log` writes it with the key prefix
//     <producer>.<incarnation>; a trailing t marks a topic publish. n grows
//     with every send of one incarnation.
//   - Every goroutine a Net starts (the proxies' accept loops and links)
//     ends with Net.Close.
//
// chaos imports no petrel package: it works on keys and TCP only.
package chaos

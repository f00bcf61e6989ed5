package petrel_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/queue"
)

// TestNackReasonIsBounded: a consumer that nacks with a reason of
// megabytes (a stack dump, a whole payload) makes a dead letter whose
// reason is cut to queue.MaxReason and says so, embedded and remote
// alike; it used to be stored whole by an embedded consumer, and sent
// whole with each delivery of the dead letter.
func TestNackReasonIsBounded(t *testing.T) {
	for _, k := range endpointKinds {
		t.Run(k.name, func(t *testing.T) {
			_, ep := k.open(t, func(c *petrel.Config) {
				c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
					Queue: queue.Policy{MaxDeliveries: 1}}}
			})
			p := ep.Producer()
			if err := p.Send(context.Background(), p.CreateCommandMessage("jobs")); err != nil {
				t.Fatal(err)
			}
			c := consumer(t, ep, "jobs")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d, err := c.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Nack(strings.Repeat("é", 3<<20)); err != nil {
				t.Fatal(err)
			}
			dlq := consumer(t, ep, "jobs.dlq")
			var dl *petrel.Delivery
			petreltest.Eventually(t, "the dead letter", func() bool {
				dl, err = dlq.Poll()
				return err == nil
			})
			if len(dl.Reason) > queue.MaxReason || !strings.HasSuffix(dl.Reason, "bytes cut)") || !utf8.ValidString(dl.Reason) {
				t.Fatalf("dead letter's reason of %d bytes ends %q; want at most %d, cut at a character, saying so",
					len(dl.Reason), dl.Reason[max(len(dl.Reason)-40, 0):], queue.MaxReason)
			}
			if err := dl.Ack(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

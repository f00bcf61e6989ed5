package mqttgw_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// A session belongs to the identity that made it: another identity that
// claims its client id is refused with 0x85 (0x02 under MQTT 3.1.1),
// whether it would resume the session, start it clean or take over its
// connection, before and after a restart. The session is untouched: its
// owner still finds what was published to it meanwhile, and only that.
func TestSessionHeldByItsIdentity(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Peers = []petrel.PeerConfig{
		{Name: "alice", Secret: "alice-secret", Kind: petrel.PeerKindClient},
		{Name: "mallory", Secret: "mallory-secret", Kind: petrel.PeerKindClient},
	}
	cfg.Access = []petrel.AccessRule{
		{Identity: "alice", Publish: []string{"sensors.#"}, Subscribe: []string{"sensors.secret.#"}},
		{Identity: "mallory", Subscribe: []string{"sensors.public.#"}},
	}
	tn := openNode(t, cfg)
	hour := ptr(uint32(3600))
	as := func(user string, clean bool) *paho.Connect {
		return &paho.Connect{ClientID: "alice-1", CleanStart: clean, KeepAlive: 30, Username: user, UsernameFlag: true,
			Password: []byte(user + "-secret"), PasswordFlag: true,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: hour, RequestProblemInfo: true}}
	}
	// mallory claims alice's client id, and must get 0x85.
	claim := func(clean bool) {
		t.Helper()
		conn, err := netDial(tn)
		if err != nil {
			t.Fatal(err)
		}
		c := paho.NewClient(paho.ClientConfig{Conn: conn})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ca, err := c.Connect(ctx, as("mallory", clean))
		if err == nil {
			_ = c.Disconnect(&paho.Disconnect{})
		}
		<-c.Done()
		if err == nil || ca == nil || ca.ReasonCode != 0x85 {
			t.Fatalf("mallory as alice-1 (clean start %v): connack %+v, %v; want 0x85", clean, ca, err)
		}
		if ca.Properties == nil || !strings.Contains(ca.Properties.ReasonString, "another identity") {
			t.Errorf("reason string %+v, want one that says why", ca.Properties)
		}
	}
	publishAs := func(payload string) {
		t.Helper()
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "alice-pub", CleanStart: true, Username: "alice", UsernameFlag: true,
			Password: []byte("alice-secret"), PasswordFlag: true}, paho.ClientConfig{})
		if _, err := publish(c, &paho.Publish{Topic: "sensors/secret/x", QoS: 1, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	}

	// alice's persistent session, subscribed, then gone.
	r := newReceived()
	c, _ := pahoClient(t, tn, as("alice", true), paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, c, "sensors/secret/#", 1)
	// While alice is connected, mallory cannot take her connection over.
	claim(false)
	publishAs("first")
	if p := r.next(t); string(p.Payload) != "first" {
		t.Fatalf("alice got %q, want first", p.Payload)
	}
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()

	publishAs("the secret")
	claim(false) // resume it
	claim(true)  // or discard it
	if st := tn.Status().MQTT; st.RefusedClientIDs != 3 || st.AuthFailed != 0 {
		t.Fatalf("refused client ids %d, auth failures %d; want 3 and 0", st.RefusedClientIDs, st.AuthFailed)
	}

	// Under MQTT 3.1.1, with mosquitto_sub: identifier rejected.
	if _, err := exec.LookPath("mosquitto_sub"); err == nil {
		out, err := mosquitto(t, "mosquitto_sub", "-V", "mqttv311", "-h", "127.0.0.1", "-p", tn.port(), "-i", "alice-1", "-c",
			"-u", "mallory", "-P", "mallory-secret", "-t", "sensors/public/#", "-C", "1", "-W", "5")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(strings.ToLower(out), "identifier rejected") {
			t.Fatalf("mosquitto_sub as mallory: %v\n%s; want identifier rejected", err, out)
		}
	}

	// The owner is stored with the session: a restart keeps it.
	tn.restart()
	claim(false)
	if st := tn.Status().MQTT; st.RefusedClientIDs != 1 {
		t.Fatalf("after restart, refused client ids %d, want 1", st.RefusedClientIDs)
	}
	r = newReceived()
	_, ca := pahoClient(t, tn, as("alice", false), paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	if !ca.SessionPresent {
		t.Fatal("alice's session is gone")
	}
	if p := r.next(t); string(p.Payload) != "the secret" {
		t.Fatalf("alice got %q, want the secret", p.Payload)
	}
	r.none(t, 200*time.Millisecond)
}

// A persistent session's subscriptions are its identity's as the session
// is: a remote client of another identity (petrel.Dial) that computes the
// name of the session's Petrel subscription, or of a shared group's, and
// subscribes under it is refused, with no word of the subscription, and
// takes nothing; the session's owner finds all that was published to it
// meanwhile when it resumes.
func TestSessionSubscriptionKeptFromRemoteClients(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = []petrel.PeerConfig{
		{Name: "alice", Secret: "alice-secret", Kind: petrel.PeerKindClient},
		{Name: "mallory", Secret: "mallory-secret", Kind: petrel.PeerKindClient},
	}
	cfg.Access = []petrel.AccessRule{
		{Identity: "alice", Publish: []string{"sensors.#"}, Subscribe: []string{"sensors.#"}},
		{Identity: "mallory", Subscribe: []string{"sensors.#"}},
	}
	tn := openNode(t, cfg)
	alice := func(clean bool, r *received) (*paho.Client, *paho.Connack) {
		cc := paho.ClientConfig{}
		if r != nil {
			cc.OnPublishReceived = []func(paho.PublishReceived) (bool, error){r.handler}
		}
		return pahoClient(t, tn, &paho.Connect{ClientID: "dashboard", CleanStart: clean, KeepAlive: 30, Username: "alice", UsernameFlag: true,
			Password: []byte("alice-secret"), PasswordFlag: true,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}}, cc)
	}
	c, _ := alice(true, nil)
	subscribe(t, c, "sensors/#", 1)
	subscribe(t, c, "$share/g/sensors/#", 1)
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	p := tn.Producer()
	for i := range 10 {
		m := p.CreateDataMessage("sensors.x")
		m.Body = []byte(fmt.Sprint("s", i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	session := mqttgw.DurableName("dashboard", "sensors/#")
	share := mqttgw.ShareName("g", "sensors/#")
	petreltest.Eventually(t, "the session's subscriptions to hold the 10 publishes", func() bool {
		return tn.depth(session) == 10 && tn.depth(share) == 10
	})

	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	cl, err := petrel.Dial(ctx, "tcp://"+tn.ListenAddr(), petrel.DialOptions{Name: "mallory", Secret: "mallory-secret", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, name := range []string{session, share} {
		_, err := cl.Subscribe(ctx, "sensors.#", petrel.SubscribeOptions{Name: name, Durable: true})
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "MQTT gateway") {
			t.Fatalf("mallory subscribing as %s: %v; want a refusal naming the MQTT gateway's names", name, err)
		}
	}
	if d := tn.depth(session); d != 10 {
		t.Fatalf("the session's subscription holds %d after mallory's tries, want 10", d)
	}

	r := newReceived()
	_, ca := alice(false, r)
	if !ca.SessionPresent {
		t.Fatal("alice's session is gone")
	}
	got := map[string]int{}
	for range 20 { // each publish once through the filter, once through the group
		got[string(r.next(t).Payload)]++
	}
	for i := range 10 {
		if n := got[fmt.Sprint("s", i)]; n != 2 {
			t.Fatalf("alice got s%d %d times, want 2 (filter and group): %v", i, n, got)
		}
	}
	r.none(t, 200*time.Millisecond)
}

//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/gorilla/websocket"
)

// TestMQTTListenersSurviveFileExhaustion runs a `petrel node` under
// `ulimit -n 128` with an MQTT TCP listener, a WebSocket one, the link
// listener and the admin one, and exhausts its file descriptors for a
// moment: 200 idle connections to the MQTT port, then a few to each of
// the others while the node has none left, so that each listener's
// Accept fails with EMFILE. Once they are closed, every listener accepts
// again: an MQTT client publishes over TCP and over WebSocket, the link
// listener counts a new connection, /readyz is ready, the accept errors
// are counted and logged once per listener. Before, mochi's TCP listener
// returned at its first Accept error and the MQTT port queued
// connections that nothing ever accepted, with nothing logged and
// /readyz still ready; the link listener logged every retry, up to one a
// second, and counted none.
func TestMQTTListenersSurviveFileExhaustion(t *testing.T) {
	const limit = 128
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "n.yaml"), "node: {name: n, data_dir: n}\ntopics: [{pattern: \"#\"}]\n"+
		"listen: \"127.0.0.1:0\"\nmqtt: {listen: \"127.0.0.1:0\", websocket: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\"}\nlog: {level: info}\n")
	p := startNodeCmd(t, dir, exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit),
		petrelBin, "node", "-c", filepath.Join(dir, "n.yaml")))
	ready := p.ready(t)
	mqttAddr, admin, link, pid := ready["mqtt"], ready["admin"], ready["listen"], p.cmd.Process.Pid
	if n := openFiles(t, pid); n >= limit/2 {
		t.Fatalf("the node has %d files open at start, too many for the test's limit of %d", n, limit)
	}
	var st struct {
		MQTT struct {
			WebSocket string `json:"websocket"`
		} `json:"mqtt"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, admin, "/api/status")), &st); err != nil || st.MQTT.WebSocket == "" {
		t.Fatalf("no websocket address in the status: %v", err)
	}
	ws := st.MQTT.WebSocket
	if err := publishOverTCP(mqttAddr); err != nil {
		t.Fatalf("before: %v", err)
	}

	// Exhaust: the node accepts MQTT connections until it has no
	// descriptor left, the rest wait in the kernel's queue.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	dialFrom := func(addr string, from net.IP) {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: from}}
		if c, err := d.Dial("tcp", addr); err == nil {
			flood = append(flood, c)
		}
	}
	dial := func(addr string) { dialFrom(addr, nil) }
	// From 20 loopback addresses, 10 each: one address holds at most 16
	// of the places of connections awaiting their CONNECT.
	for i := range 200 {
		dialFrom(mqttAddr, net.IPv4(127, 0, 0, byte(10+i%20)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for openFiles(t, pid) < limit {
		if time.Now().After(deadline) {
			t.Fatalf("the node holds %d files with 200 connections to its MQTT port, never its limit of %d", openFiles(t, pid), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Connections to the other listeners meet EMFILE at their Accept too.
	for range 10 {
		dial(ws)
		dial(admin)
		dial(link)
	}
	time.Sleep(500 * time.Millisecond)
	for _, c := range flood {
		c.Close()
	}
	flood = nil

	// Every listener accepts again, within the longest wait between two
	// tries (1 s) and what the queued connections take.
	deadline = time.Now().Add(10 * time.Second)
	for {
		err := publishOverTCP(mqttAddr)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MQTT TCP listener does not accept again after the descriptors came back (%d open): %v", openFiles(t, pid), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := connectOverWebSocket(ws); err != nil {
		t.Fatalf("the MQTT WebSocket listener after the descriptors came back: %v", err)
	}
	if got := httpGet(t, admin, "/readyz"); got != "ready\n" {
		t.Fatalf("/readyz %q", got)
	}
	// The link listener accepts again: a new connection is counted.
	before := metricValue(httpGet(t, admin, "/metrics"), "petrel_receiver_connections_total")
	c, err := net.DialTimeout("tcp", link, 2*time.Second)
	if err != nil {
		t.Fatalf("the link listener after the descriptors came back: %v", err)
	}
	defer c.Close()
	for metricValue(httpGet(t, admin, "/metrics"), "petrel_receiver_connections_total") <= before {
		if time.Now().After(deadline) {
			t.Fatal("the link listener does not accept again after the descriptors came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics := httpGet(t, admin, "/metrics")
	for _, m := range []string{`petrel_mqtt_accept_errors_total{listener="tcp"}`, `petrel_mqtt_accept_errors_total{listener="websocket"}`, `petrel_admin_accept_errors_total`, `petrel_receiver_accept_errors_total`} {
		if v := metricValue(metrics, m); v < 1 {
			t.Errorf("%s %v, want the accept errors counted", m, v)
		}
	}

	p.stop(t)
	stderr := p.stderr.String()
	for _, l := range []string{`msg="mqtt accept failed; retrying" component=mqtt listener=tcp`, `msg="mqtt accept failed; retrying" component=mqtt listener=websocket`, `msg="admin accept failed; retrying"`, `msg="accept failed; retrying" component=receiver`} {
		if n := strings.Count(stderr, l); n != 1 {
			t.Errorf("%d log lines %s, want 1 (at most one every 10 s)", n, l)
		}
	}
	if strings.Contains(stderr, "stopped accepting") || strings.Contains(stderr, "http: Accept error") {
		t.Errorf("a listener stopped, or net/http retried on its own:\n%s", stderr)
	}
}

// openFiles counts the descriptors process pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	des, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}

// httpGet returns the body of GET path from the admin endpoint at addr.
func httpGet(t *testing.T, addr, path string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue is the value of the sample name (with its labels) in a
// Prometheus text exposition, -1 when it is absent.
func metricValue(text, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// publishOverTCP connects an MQTT 5 client to addr and publishes at QoS
// 1, within a few seconds.
func publishOverTCP(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "probe", CleanStart: true, KeepAlive: 30}); err != nil {
		conn.Close()
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	}()
	if pr, err := c.Publish(ctx, &paho.Publish{Topic: "a/b", QoS: 1, Payload: []byte("after")}); err != nil || pr.ReasonCode != 0 {
		return fmt.Errorf("publish: %+v %v", pr, err)
	}
	return nil
}

// connectOverWebSocket opens an MQTT over WebSocket connection to addr
// and sends an MQTT 3.1.1 CONNECT, which must get its CONNACK.
func connectOverWebSocket(addr string) error {
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 3 * time.Second}
	c, _, err := d.Dial("ws://"+addr+"/mqtt", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	connect := []byte{0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 30, 0, 2, 'w', 's'}
	if err := c.WriteMessage(websocket.BinaryMessage, connect); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		return err
	}
	if want := []byte{0x20, 2, 0, 0}; !bytes.Equal(b, want) {
		return fmt.Errorf("CONNACK % x, want % x", b, want)
	}
	return nil
}

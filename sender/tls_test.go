package sender

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/session"
)

func TestTLSForConnector(t *testing.T) {
	tests := []struct {
		pool      *tls.Config
		connector string
		name      string // ServerName wanted
		err       string
	}{
		{nil, "tls://hub-1.example.com:7400", "hub-1.example.com", ""},
		{nil, "tls://[::1]:7400", "::1", ""},
		{&tls.Config{}, "tls://10.0.0.9:7400", "10.0.0.9", ""},
		{&tls.Config{ServerName: "hub"}, "tls://10.0.0.9:7400", "hub", ""},
		{&tls.Config{ServerName: "hub"}, "tls://10.0.0.9:7400?server_name=hub-2", "hub-2", ""},
		{nil, "tls://h:1?ca=/etc/ca.pem", "", `tls connector option "ca" is not known`},
	}
	for _, tt := range tests {
		t.Run(tt.connector, func(t *testing.T) {
			cs, err := address.ParseConnectors(tt.connector)
			if err != nil {
				t.Fatal(err)
			}
			p := NewPool(session.Config{}, address.NewDirectory(), quiet).withTLS(tt.pool)
			c, err := p.tlsFor(cs.List[0])
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("tlsFor = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ServerName != tt.name || c.MinVersion < tls.VersionTLS12 && tt.pool == nil {
				t.Errorf("ServerName %q MinVersion %x, want %q", c.ServerName, c.MinVersion, tt.name)
			}
			if tt.pool != nil && c == tt.pool {
				t.Error("the pool's configuration was not copied")
			}
		})
	}
}

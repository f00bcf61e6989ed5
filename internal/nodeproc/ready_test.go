package nodeproc

import (
	"fmt"
	"testing"
)

func TestParseReady(t *testing.T) {
	for _, tc := range []struct {
		line string
		want map[string]string
	}{
		{"ready node=a id=00ff data_dir=/tmp/x pid=12", map[string]string{"node": "a", "id": "00ff", "data_dir": "/tmp/x", "pid": "12"}},
		{`ready node=b id=1 data_dir="/tmp/a dir/x=y" listen=127.0.0.1:7400`, map[string]string{"node": "b", "id": "1", "data_dir": "/tmp/a dir/x=y", "listen": "127.0.0.1:7400"}},
	} {
		got, err := ParseReady(tc.line)
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.line, got, tc.want)
		}
	}
	for _, bad := range []string{"not ready", "ready node", `ready data_dir="unterminated`} {
		if _, err := ParseReady(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

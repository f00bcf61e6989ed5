package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	petrel "github.com/petrelmq/petrel"
)

const adminToken = "admin-token-0123456789abcdef"

// writeSecret writes content to a file of mode perm in a temporary
// directory and returns its path.
func writeSecret(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAdminSectionFields(t *testing.T) {
	tok := writeSecret(t, adminToken+"\n", 0o600)
	f, err := Parse("petrel.yaml", []byte(fmt.Sprintf(`admin:
  listen: 0.0.0.0:9090
  token_file: %s
  metrics_auth: true
  hosts: [petrel.example.com, "proxy:8443"]
  file_roots: [/srv/outgoing]
`, tok)))
	if err != nil {
		t.Fatal(err)
	}
	want := petrel.AdminConfig{Listen: "0.0.0.0:9090", Token: adminToken, MetricsAuth: true,
		Hosts: []string{"petrel.example.com", "proxy:8443"}, FileRoots: []string{"/srv/outgoing"}}
	if got := f.NodeConfig().Admin; !reflect.DeepEqual(got, want) {
		t.Errorf("Admin = %+v, want %+v", got, want)
	}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if out := fmt.Sprintf(verb, f); strings.Contains(out, adminToken) {
			t.Errorf("%s of a File shows the token: %s", verb, out)
		}
	}
}

func TestAdminSectionErrors(t *testing.T) {
	good := writeSecret(t, adminToken, 0o600)
	tests := []struct {
		name, yaml string
		line, col  int
		field      string
		target     error
		reason     string
	}{
		{"every interface without a token", "node: {name: a}\nadmin:\n  listen: :9090\n", 3, 3, "admin.listen", petrel.ErrAdminExposed, "set admin.token_file"},
		{"wildcard without a token", "admin:\n  listen: 0.0.0.0:0\n", 2, 3, "admin.listen", petrel.ErrAdminExposed, "not a loopback address"},
		{"token file readable by others", "admin:\n  listen: 127.0.0.1:0\n  token_file: " + writeSecret(t, adminToken, 0o644) + "\n", 3, 3,
			"admin.token_file", petrel.ErrSecretReadable, "chmod 600 "},
		{"token file readable by the group", "admin:\n  token_file: " + writeSecret(t, adminToken, 0o640) + "\n", 2, 3,
			"admin.token_file", petrel.ErrSecretReadable, "has mode 0640"},
		{"empty token file", "admin:\n  token_file: " + writeSecret(t, "\n", 0o600) + "\n", 2, 3, "admin.token_file", nil, "is empty: put the token in it"},
		{"short token", "admin:\n  token_file: " + writeSecret(t, "abc\n", 0o600) + "\n", 2, 3, "admin.token_file", nil, "use at least 16"},
		{"missing token file", "admin:\n  token_file: /nonexistent/petrel-token\n", 2, 3, "admin.token_file", os.ErrNotExist, "cannot read"},
		{"empty token_file", "admin:\n  token_file: ''\n", 2, 3, "admin.token_file", nil, "must not be empty"},
		{"host as a URL", "admin:\n  token_file: " + good + "\n  hosts: [ok, 'http://x/']\n", 3, 15, "admin.hosts[1]", nil, "not a host name"},
		{"relative file root", "admin:\n  file_roots:\n    - out\n", 3, 7, "admin.file_roots[0]", nil, "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("petrel.yaml", []byte(tt.yaml))
			wantError(t, err, tt.line, tt.col, tt.field, tt.target, tt.reason)
			if err != nil && strings.Contains(err.Error(), adminToken) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

func TestSecretFileOpenToOthers(t *testing.T) {
	path := writeSecret(t, "s3cret-link-secret\n", 0o604)
	_, err := Parse("petrel.yaml", []byte("node: {name: a}\nsecret_file: "+path+"\n"))
	wantError(t, err, 2, 1, "secret_file", petrel.ErrSecretReadable, "run chmod 600 "+path)
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the secret: %v", err)
	}
}

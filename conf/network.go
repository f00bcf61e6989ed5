package conf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	petrel "github.com/petrelmq/petrel"
)

// Secret is the links' shared secret. Its String and GoString hide it, so
// that logging a File or printing it with %+v does not leak it.
type Secret string

// String returns "[redacted]", or "" for no secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the secret from %#v too.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// maxSecretFile bounds what secret_file reads: a secret is a line, and a
// wrong path (a log, a disk image) should cost nothing to refuse.
const maxSecretFile = 64 << 10

// readSecretFile reads a file that holds a secret (secret_file,
// admin.token_file); tests replace it. A file that users other than its
// owner may read or change is refused with petrel.ErrSecretReadable: the
// secret would be theirs too.
var readSecretFile = func(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := privateFile(f, path); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("more than %d bytes: is it the right file?", maxSecretFile)
	}
	return data, nil
}

// privateFile refuses the open file f at path if its group or others have
// any access to it. Windows has no such modes.
func privateFile(f *os.File, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: users other than its owner may read or change it; run chmod 600 %s: %w",
			path, perm, path, petrel.ErrSecretReadable)
	}
	return nil
}

// linkKeys are the top-level keys that say how this node meets others:
// listen, secret and secret_file. They are checked together because secret
// and secret_file exclude each other.
type linkKeys struct{ f *File }

func (k linkKeys) check(c *checker, _ string) {
	if c.has("listen") {
		if err := checkListen(k.f.Listen); err != nil {
			c.fail("listen", err)
		}
	}
	c.nonEmpty("secret", string(k.f.Secret), "leave it out for links without a secret")
	c.nonEmpty("secret_file", k.f.SecretFile, "leave it out for links without a secret")
	if c.has("secret") && c.has("secret_file") {
		later := "secret_file"
		if c.set["secret_file"].before(c.set["secret"]) {
			later = "secret"
		}
		c.fail(later, reasonf(nil, "set secret or secret_file, not both"))
	}
}

// checkListen checks a listen address: host:port with a numeric port, where
// an empty host means every interface and port 0 a free port chosen at
// start (`petrel node` prints it on its ready line).
func checkListen(s string) error {
	const want = "(want host:port, such as 127.0.0.1:7400, or :7400 for every interface)"
	if s == "" {
		return reasonf(nil, "must not be empty (leave it out for no listener)")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return reasonf(nil, "%s is not host:port %s", short(s), want)
	}
	if strings.ContainsAny(host, " \t") {
		return reasonf(nil, "host %s has a space %s", short(host), want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || port[0] == '+' {
		return reasonf(nil, "port %s is not a number from 0 to 65535 %s", short(port), want)
	}
	return nil
}

// readSecret fills f.Secret from secret_file, if the file names one. It
// runs with the checks, so a file that cannot be read is reported at its
// line like any other problem. The path is relative to the working
// directory, as data_dir is.
func (f *File) readSecret(c *checker) {
	if f.SecretFile == "" || c.has("secret") {
		return // none, or refused already
	}
	if secret, ok := readSecretValue(c, "secret_file", f.SecretFile, "the secret"); ok {
		f.Secret = Secret(secret)
	}
}

// readSecretValue reads the secret in the file at path, which the key
// names (what says what it holds), and reports a problem to c.
func readSecretValue(c *checker, key, path, what string) (string, bool) {
	data, err := readSecretFile(path)
	if errors.Is(err, petrel.ErrSecretReadable) {
		// The reason says the mode and the fix; the sentinel stays in Err.
		c.fail(key, reasonf(err, "%s", strings.TrimSuffix(err.Error(), ": "+petrel.ErrSecretReadable.Error())))
		return "", false
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the reason already
		}
		c.fail(key, reasonf(err, "cannot read %s: %v", short(path), err))
		return "", false
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if secret == "" {
		c.fail(key, reasonf(nil, "%s is empty: put %s in it, or leave %s out", short(path), what, key))
		return "", false
	}
	return secret, true
}

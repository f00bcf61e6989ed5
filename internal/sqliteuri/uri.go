// Package sqliteuri opens SQLite databases at paths: the file: URI that
// opens the database at a path, whatever characters the path holds, and
// the checks around the opening that refuse what SQLite would take
// without a word (check.go).
package sqliteuri

import (
	"net/url"
	"strings"
)

// escaper percent-encodes what ends a file: URI's path or begins an
// escape in it. A Replacer makes one pass, so the '%' it writes is not
// encoded again.
var escaper = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// URI returns "file:<path>?<params>" with the path's '%', '?' and '#'
// percent-encoded. SQLite reads a file: URI's path up to its first '?'
// or '#' and decodes each %HH in it; go-sqlite3 splits its own
// parameters off at the first '?'. Unescaped, a data directory named
// "site#2" opened the database "site" beside it, which another node's
// "site#1" opened too.
func URI(path string, params url.Values) string {
	return "file:" + escaper.Replace(path) + "?" + params.Encode()
}

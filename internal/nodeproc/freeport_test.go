package nodeproc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gofrs/flock"
)

// TestFreePortReserves: the ports FreePort gives one process are distinct,
// and each is locked against other processes, which skip a port locked by
// another.
func TestFreePortReserves(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
	}
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// Another holder of the lock file, as another process would be: a
	// flock of another open file is refused while this process holds it.
	other := flock.New(filepath.Join(os.TempDir(), "petrel-test-ports", strconv.Itoa(p)))
	if ok, err := other.TryLock(); err != nil || ok {
		other.Unlock()
		t.Fatalf("port %d's lock taken by another holder: %v, %v", p, ok, err)
	}
	// A port another holder locked first is not reserved here.
	const taken = 1023 // below FreePort's range: only this test locks it
	lock := flock.New(filepath.Join(os.TempDir(), "petrel-test-ports", strconv.Itoa(taken)))
	if ok, err := lock.TryLock(); err != nil || !ok {
		t.Skipf("cannot lock the test's port file: %v", err)
	}
	defer lock.Unlock()
	if reserve(taken) {
		t.Fatal("a port locked by another holder was reserved")
	}
}

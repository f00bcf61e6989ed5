package petrel

import (
	"sort"

	"github.com/petrelmq/petrel/queue"
)

func sortStats(s []queue.Stats) {
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
}

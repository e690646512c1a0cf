package harness

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/features"
)

func TestZZMap(t *testing.T) {
	uses, err := featureSteps(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{}
	s.areas = newAreas(s)
	f, _ := os.Create("/tmp/stepmap2.tsv")
	defer f.Close()
	for _, a := range s.areas.vocabulary() {
		for _, d := range a.steps {
			fn := runtime.FuncForPC(reflect.ValueOf(d.fn).Pointer()).Name()
			re := regexp.MustCompile(d.pattern)
			set := map[string]bool{}
			for _, u := range uses {
				if re.MatchString(u.text) {
					set[strings.TrimSuffix(strings.SplitN(u.where, ":", 2)[0], ".feature")] = true
				}
			}
			var fs []string
			for k := range set {
				fs = append(fs, k)
			}
			sort.Strings(fs)
			fmt.Fprintf(f, "%s\t%s\t%s\n", a.name, fn, strings.Join(fs, ","))
		}
	}
}

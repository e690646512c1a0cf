package perf

import (
	"math"
	"slices"
	"time"
)

// Summary is the spread of a figure over its rounds.
//
//	s := perf.Summarize(row.Measured)
//	fmt.Printf("%.2f / %.2f / %.2f", s.Min, s.Median, s.Max)
type Summary struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Summarize returns the minimum, the median and the maximum of vs (the median of an even count
// is the mean of the two middle values). vs is not changed; an empty vs gives NaNs.
//
//	Summarize([]float64{3, 1, 2}) // {Min: 1, Median: 2, Max: 3}
func Summarize(vs []float64) Summary {
	if len(vs) == 0 {
		return Summary{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return Summary{Min: s[0], Median: median(s), Max: s[len(s)-1]}
}

// Median is the middle value of vs (the mean of the two middle ones for an even count), NaN
// for an empty vs. vs is not changed.
//
//	Median([]float64{4, 1, 3, 2}) // 2.5
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return median(s)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of samples: the smallest sample at or
// above which a share q of them lie. samples is not changed; an empty one gives 0.
//
//	Percentile(ds, 0.99) // the p99 of ds
func Percentile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Ratios is measured[i] / baseline[i] for each round i both have (NaN where the baseline is 0).
//
//	Ratios([]float64{2, 3}, []float64{4, 3}) // [0.5 1]
func Ratios(measured, baseline []float64) []float64 {
	n := min(len(measured), len(baseline))
	out := make([]float64, n)
	for i := range n {
		if baseline[i] == 0 {
			out[i] = math.NaN()
			continue
		}
		out[i] = measured[i] / baseline[i]
	}
	return out
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSecond is n things done in d, per second.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / d.Seconds()
}

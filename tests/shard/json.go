package shard

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// tripGen produces taxi-trip-like JSON records, one per line, in roughly
// increasing pickup time, as a log-shaped index holds them.
type tripGen struct {
	rng  *rand.Rand
	unix int64 // pickup time of the next record, seconds
}

func newTripGen(seed [32]byte) *tripGen {
	return &tripGen{
		rng:  rand.New(rand.NewChaCha8(seed)),
		unix: time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
	}
}

var (
	vendors  = []string{"1", "2"}
	colors   = []string{"yellow", "green"}
	flags    = []string{"N", "N", "N", "Y"}
	payments = []string{"1", "1", "1", "2", "2", "3", "4"}
	rates    = []string{"1", "1", "1", "1", "2", "3", "5"}
)

func (g *tripGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// appendRecord appends one record and a newline to b.
func (g *tripGen) appendRecord(b []byte) []byte {
	r := g.rng
	g.unix += int64(r.IntN(4))
	pickup := g.unix
	dur := int64(60 + r.IntN(3600))
	miles := int64(10 + r.IntN(2500))    // hundredths of a mile
	fare := 250 + miles*250/100 + dur/30 // cents
	tip := int64(0)
	if r.IntN(3) > 0 {
		tip = fare * int64(r.IntN(30)) / 100
	}
	tolls := int64(0)
	if r.IntN(10) == 0 {
		tolls = 550 + int64(r.IntN(600))
	}
	extra := int64(r.IntN(3)) * 50
	total := fare + tip + tolls + extra + 50 + 30

	b = append(b, `{"vendor_id":"`...)
	b = append(b, g.pick(vendors)...)
	b = append(b, `","pickup_datetime":"`...)
	b = time.Unix(pickup, 0).UTC().AppendFormat(b, time.DateTime)
	b = append(b, `","dropoff_datetime":"`...)
	b = time.Unix(pickup+dur, 0).UTC().AppendFormat(b, time.DateTime)
	b = append(b, `","passenger_count":`...)
	b = strconv.AppendInt(b, int64(1+r.IntN(6)), 10)
	b = append(b, `,"trip_distance":`...)
	b = appendFixed(b, miles, 2)
	b = append(b, `,"pickup_location":[`...)
	b = appendFixed(b, -74_050_000+int64(r.IntN(300_000)), 6)
	b = append(b, ',')
	b = appendFixed(b, 40_600_000+int64(r.IntN(300_000)), 6)
	b = append(b, `],"dropoff_location":[`...)
	b = appendFixed(b, -74_050_000+int64(r.IntN(300_000)), 6)
	b = append(b, ',')
	b = appendFixed(b, 40_600_000+int64(r.IntN(300_000)), 6)
	b = append(b, `],"rate_code":"`...)
	b = append(b, g.pick(rates)...)
	b = append(b, `","store_and_fwd_flag":"`...)
	b = append(b, g.pick(flags)...)
	b = append(b, `","payment_type":"`...)
	b = append(b, g.pick(payments)...)
	b = append(b, `","fare_amount":`...)
	b = appendFixed(b, fare, 2)
	b = append(b, `,"extra":`...)
	b = appendFixed(b, extra, 2)
	b = append(b, `,"mta_tax":0.5,"tip_amount":`...)
	b = appendFixed(b, tip, 2)
	b = append(b, `,"tolls_amount":`...)
	b = appendFixed(b, tolls, 2)
	b = append(b, `,"improvement_surcharge":0.3,"total_amount":`...)
	b = appendFixed(b, total, 2)
	b = append(b, `,"cab_color":"`...)
	b = append(b, g.pick(colors)...)
	return append(b, "\"}\n"...)
}

// appendFixed appends v/10^dec in decimal with exactly dec decimals.
func appendFixed(b []byte, v int64, dec int) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	pow := int64(1)
	for range dec {
		pow *= 10
	}
	b = strconv.AppendInt(b, v/pow, 10)
	if dec == 0 {
		return b
	}
	b = append(b, '.')
	var tmp [20]byte
	frac := strconv.AppendInt(tmp[:0], v%pow+pow, 10) // the leading "1" keeps the zeros
	return append(b, frac[1:]...)
}

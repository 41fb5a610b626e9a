package streams

import "fmt"

// Calibrated is the provider p as the calibration c measured it: the one
// that will carry the streams (dragonc run serves every VI on the software
// VI, whatever NIC the model describes). Its VIs, copy threshold and
// chunk size are the calibration's; the model's latency table stays for
// the record, but Decide follows the measurements.
func (p *Provider) Calibrated(c *Calibration) *Provider {
	q := *p
	q.Calibration = c
	q.Name = c.Provider
	q.VIs = c.VIs
	q.CopyMax = c.Params.CopyMax
	q.MaxTransfer = c.Params.Chunk
	return &q
}

// calibratedChoice decides a candidate stream from the calibration: over
// the VI only where it measured faster than kernel TCP at the stream's
// message size, at the median and at the 99th percentile alike.
func (p *Provider) calibratedChoice(c *Choice) (vi bool) {
	cal := p.Calibration
	m, ok := cal.At(c.Size)
	if !ok {
		c.Reason = fmt.Sprintf("%d B messages: the calibration of %s measured up to %d B only; unmeasured, the stream stays on kernel TCP",
			c.Size, cal.Provider, cal.Sizes[len(cal.Sizes)-1].Size)
		return false
	}
	c.SOVIAus, c.TCPus, c.SOVIAp99, c.TCPp99 = round(m.VIP50), round(m.TCPP50), round(m.VIP99), round(m.TCPP99)
	nums := fmt.Sprintf("p50 %.1f us against TCP's %.1f us, p99 %.1f us against %.1f us", c.SOVIAus, c.TCPus, c.SOVIAp99, c.TCPp99)
	switch {
	case c.SOVIAus >= c.TCPus:
		c.Reason = fmt.Sprintf("%d B messages: %s measured slower than kernel TCP (%s)", c.Size, cal.Provider, nums)
		return false
	case c.SOVIAp99 >= c.TCPp99:
		c.Reason = fmt.Sprintf("%d B messages: %s measured slower than kernel TCP at the 99th percentile (%s)", c.Size, cal.Provider, nums)
		return false
	}
	c.Reason = fmt.Sprintf("%d B messages: %s measured %s", c.Size, cal.Provider, nums)
	return true
}

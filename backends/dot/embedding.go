package dot

import (
	"fmt"

	"github.com/dragonc/dragonc/embed"
)

// Plan draws an embedding: the configured PRG and, per queue, the LPG nodes
// that matter there (software plain, hardware shaded, removed dashed).
func Plan(r *embed.Result) string {
	em := r.Embedding
	var views []QueueView
	for _, qe := range em.Queues {
		qe := qe
		views = append(views, QueueView{
			Name: fmt.Sprintf("queue %d (core %d)", qe.ID, qe.Core),
			Status: func(node string) Status {
				switch qe.StatusOf(node) {
				case embed.Software:
					return Software
				case embed.Hardware, embed.HardwareFlag:
					return Hardware
				case embed.Removed:
					return Removed
				}
				return Omit
			},
		})
	}
	return Embedding(fmt.Sprintf("%s on %s", r.Plan.Stack, r.Plan.NIC), em.HW, em.LPG, views)
}

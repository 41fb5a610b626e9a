package dot

import (
	"fmt"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/internal/graph"
)

// Plan draws an embedding: the configured PRG and, per queue, the LPG nodes
// that matter there (software plain, hardware shaded, removed dashed).
func Plan(r *embed.Result) string {
	em := r.Embedding
	var views []QueueView
	for _, qe := range em.Queues {
		qe := qe
		views = append(views, QueueView{
			ID: qe.ID, Core: qe.Core,
			Status: func(node string) Status {
				switch qe.StatusOf(node) {
				case embedding.Software:
					return Software
				case embedding.Hardware, embedding.HardwareFlag:
					return Hardware
				case embedding.Removed:
					return Removed
				}
				return Omit
			},
		})
	}
	delivery := map[int]bool{}
	for _, qe := range em.Queues {
		for _, ep := range qe.Endpoints {
			if n, ok := em.Delivery(ep); ok {
				delivery[n.ID] = true
			}
		}
	}
	used, isQueue := map[int]bool{}, map[int]bool{}
	for _, q := range em.Model.Queues {
		isQueue[q.Node] = true
		if em.Queue(q.ID) != nil {
			used[q.Node] = true
		}
	}
	var engines []EngineView
	for _, en := range r.Plan.Engines {
		engines = append(engines, EngineView{Name: en.Name, Load: fmt.Sprintf("%g%%", en.Percent), Tasks: en.Tasks})
	}
	return Embedding(Picture{
		Title: fmt.Sprintf("%s on %s", r.Plan.Stack, r.Plan.NIC), HW: em.HW, LPG: em.LPG, Queues: views,
		Endpoint: func(n *graph.Node) bool { return delivery[n.ID] },
		Used:     func(n *graph.Node) bool { return used[n.ID] },
		IsQueue:  func(n *graph.Node) bool { return isQueue[n.ID] },
		Engines:  engines,
	})
}

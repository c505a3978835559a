package pump

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/queue"
)

// backlogGauges are the backlog figures of R-PUMP-13.
type backlogGauges struct {
	unfinished, oldest, rate, drain prometheus.Gauge
	// dead is read from proc_state, not counted from outcomes, so it stays up for as long as
	// DEAD rows exist (a restart or a quiet hour does not clear it) and falls on a replay or an
	// operator's acknowledgement; acked counts the acknowledged ones, still DEAD.
	dead, acked *prometheus.GaugeVec
}

func newBacklogGauges() backlogGauges {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	return backlogGauges{
		unfinished: g("msgx_pipeline_backlog_unfinished", "Unfinished (PENDING or FAILED) messages."),
		oldest: g("msgx_pipeline_backlog_oldest_unprocessed_seconds",
			"Age of the oldest unfinished message since it was enqueued (0 when none)."),
		rate: g("msgx_pipeline_backlog_rate_per_second",
			"Messages that became terminal per second over the last 5 minutes."),
		drain: g("msgx_pipeline_backlog_estimated_drain_seconds",
			"Unfinished ÷ rate: the estimated time to drain the backlog; -1 when unknown (unfinished messages but nothing finished in the window)."),
		dead: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_pipeline_messages_dead",
			Help: "DEAD messages in proc_state that no operator acknowledged, by error class: they wait for a replay or an acknowledgement."}, []string{"error_class"}),
		acked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_pipeline_messages_dead_acknowledged",
			Help: "DEAD messages in proc_state an operator acknowledged (AcknowledgeDead), by error class; kept until retention deletes them."}, []string{"error_class"}),
	}
}

func (g backlogGauges) register(reg prometheus.Registerer) {
	reg.MustRegister(g.unfinished, g.oldest, g.rate, g.drain, g.dead, g.acked)
}

func (g backlogGauges) set(s queue.Backlog) {
	g.unfinished.Set(float64(s.Unfinished))
	g.oldest.Set(s.OldestUnfinishedAge.Seconds())
	g.rate.Set(s.FinishedPerSecond)
	if s.EstimatedDrain == nil {
		g.drain.Set(-1)
	} else {
		g.drain.Set(s.EstimatedDrain.Seconds())
	}
	// Every known class is exported, 0 included, so an alert resolves on a replay instead of
	// its series going stale; a class outside the list lasts as long as its rows.
	byClass(g.dead, s.DeadByErrorClass)
	byClass(g.acked, s.DeadAcknowledgedByErrorClass)
}

func byClass(g *prometheus.GaugeVec, counts map[queue.ErrorClass]int64) {
	g.Reset()
	for _, c := range queue.ErrorClasses {
		g.WithLabelValues(string(c)).Set(float64(counts[c]))
	}
	for c, n := range counts {
		g.WithLabelValues(string(c)).Set(float64(n))
	}
}

// ReportBacklog reads the backlog figures once (queue.ReadBacklog, index scans alone, since it
// runs every BacklogInterval in every instance) and exports them.
func (p *Pump) ReportBacklog(ctx context.Context, q db.Executor) (queue.Backlog, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
	defer cancel()
	s, err := queue.ReadBacklog(ctx, q, p.clock.Now())
	if err != nil {
		return s, err
	}
	p.metrics.backlog.set(s)
	return s, nil
}

// RunBacklog refreshes the backlog gauges every BacklogInterval until ctx ends. It only reads,
// so it runs on the pool and in standbys too: the figures describe the database, not this
// instance.
func (p *Pump) RunBacklog(ctx context.Context, q db.Executor) error {
	t := time.NewTicker(p.cfg.BacklogInterval)
	defer t.Stop()
	// A PostgreSQL outage fails every refresh: it is logged when the figures become unavailable
	// and when they are back, not at every refresh (R-START-1).
	failing := false
	for {
		_, err := p.ReportBacklog(ctx, q)
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			p.logger.WarnContext(ctx, "backlog figures unavailable", "err", err)
			failing = true
		case err != nil:
			p.logger.DebugContext(ctx, "backlog figures still unavailable", "err", err)
		case failing:
			p.logger.InfoContext(ctx, "backlog figures available again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

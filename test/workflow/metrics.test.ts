import { describe, expect, it } from 'vitest';
import { createWorkflowMetrics } from '../../src/workflow/metrics.js';

describe('workflow metrics', () => {
  it('records through timer and counter handles into the same entries as by name, made at the first record', () => {
    const metrics = createWorkflowMetrics();
    const duration = metrics.timer('node.duration_ms', 'node=a');
    const executions = metrics.counter('node.executions', 'node=a,status=success');
    expect(metrics.snapshot()).toEqual({ timers: {}, counters: {}, gauges: {} });
    metrics.recordDuration('node.duration_ms', 'node=a', 4);
    duration(2);
    duration(9);
    executions();
    metrics.increment('node.executions', 'node=a,status=success', 2);
    executions(3);
    expect(metrics.snapshot()).toEqual({
      timers: { 'node.duration_ms{node=a}': { count: 3, totalMs: 15, minMs: 2, maxMs: 9, meanMs: 5 } },
      counters: { 'node.executions{node=a,status=success}': 6 },
      gauges: {},
    });
  });
});

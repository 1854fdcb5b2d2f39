import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { recordWorkflowMetrics } from '../../src/runtime/workflow-metrics.js';
import { createMetricsRegistry } from '../../src/telemetry/index.js';
import { createManualClock } from '../../src/util/index.js';
import { createWorkflowEngine, loadWorkflow } from '../../src/workflow/index.js';
import { edge, fanOutWorkflow, node, writeWorkflow } from '../workflow/helpers.js';

describe('workflow metrics on /metrics', () => {
  it('counts runs and times nodes and tools from the bus events of a real run', async () => {
    const bus = createBus();
    const metrics = createMetricsRegistry();
    const stop = recordWorkflowMetrics(bus, metrics);
    const files = fanOutWorkflow({ fan: node('fan', 'split'), arms: [{ id: 'a' }] });
    files.nodes.find((entry) => entry.id === 'a')!.tools = ['slow'];
    const dir = writeWorkflow({
      'workflow.yaml': { ...files, id: 'metered' },
      'tools.yaml': { tools: [{ id: 'slow', entrypoint: 'function:slow' }] },
    });
    const clock = createManualClock();
    const engine = await createWorkflowEngine({
      workflow: await loadWorkflow(dir),
      clock,
      publish: (type, data) => bus.publish(type, data),
      functions: {
        fan: () => ['x', 'y'],
        slow: (input) => {
          clock.advance(250);
          return input;
        },
      },
    });
    try {
      expect((await engine.run('go')).status).toBe('success');
      expect((await engine.run('again')).status).toBe('success');
    } finally {
      await engine.close();
    }
    const text = metrics.render();
    // Two runs, though each had two subtasks that ended too.
    expect(text).toContain('agentd_workflow_runs_total{workflow="metered",status="success"} 2');
    expect(text).toContain(
      'agentd_workflow_node_seconds_count{workflow="metered",node="a",status="success"} 4',
    );
    expect(text).toContain(
      'agentd_workflow_node_seconds_sum{workflow="metered",node="a",status="success"} 1',
    );
    expect(text).toContain('agentd_workflow_tool_seconds_count{workflow="metered",tool="slow"} 4');
    expect(text).toContain('agentd_workflow_tool_seconds_sum{workflow="metered",tool="slow"} 1');
    stop();
    bus.publish('workflow:task-completed', {
      eventId: 'r:1',
      workflowId: 'metered',
      rootTaskId: 'r',
      taskId: 'r',
      type: 'task_completed',
      timestamp: 0,
      payload: { status: 'success' },
    });
    expect(metrics.render()).toContain('agentd_workflow_runs_total{workflow="metered",status="success"} 2');
  });

  it('labels a failed node failure', async () => {
    const bus = createBus();
    const metrics = createMetricsRegistry();
    recordWorkflowMetrics(bus, metrics);
    const dir = writeWorkflow({
      'workflow.yaml': {
        version: 1,
        id: 'broken',
        nodes: [node('start', 'start'), node('n1', 'linear'), node('exit', 'exit')],
        edges: [edge('start', 'n1'), edge('n1', 'exit')],
      },
    });
    const engine = await createWorkflowEngine({
      workflow: await loadWorkflow(dir),
      publish: (type, data) => bus.publish(type, data),
      functions: {
        n1: () => {
          throw new Error('no');
        },
      },
    });
    try {
      expect((await engine.run('x')).status).toBe('failure');
    } finally {
      await engine.close();
    }
    const text = metrics.render();
    expect(text).toMatch(
      /agentd_workflow_node_seconds_count\{workflow="broken",node="n1",status="failure"\} 1/,
    );
    expect(text).toContain('agentd_workflow_runs_total{workflow="broken",status="failure"} 1');
  });
});

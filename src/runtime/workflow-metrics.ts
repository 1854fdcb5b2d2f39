import type { Bus } from '../bus/index.js';
import type { MetricsRegistry } from '../telemetry/index.js';

/**
 * Workflow metrics on `/metrics`, fed from the `workflow:*` events every engine publishes on the bus: the
 * engines need no handle on the registry, and a workflow run by any path (gateway, MCP, library through the
 * runtime) is counted the same way. Labels are bounded by the workflows installed (ids of workflows, nodes
 * and tools), never by run or task ids.
 */
export function recordWorkflowMetrics(bus: Bus, metrics: MetricsRegistry): () => void {
  const nodeSeconds = metrics.histogram(
    'agentd_workflow_node_seconds',
    'Workflow node executions by workflow, node and status',
  );
  const toolSeconds = metrics.histogram(
    'agentd_workflow_tool_seconds',
    'Workflow tool calls by workflow and tool',
  );
  const runs = metrics.counter('agentd_workflow_runs_total', 'Finished workflow runs by workflow and status');
  const seconds = (payload: Record<string, unknown>) =>
    typeof payload.durationMs === 'number' ? payload.durationMs / 1000 : 0;
  return bus.subscribe(
    {
      types: [
        'workflow:node-completed',
        'workflow:node-failed',
        'workflow:tool-completed',
        'workflow:task-completed',
        'workflow:task-failed',
      ],
    },
    (event) => {
      const { data } = event;
      const workflow = data.workflowId;
      switch (event.type) {
        case 'workflow:node-completed':
        case 'workflow:node-failed':
          nodeSeconds.observe(seconds(data.payload), {
            workflow,
            node: data.nodeId ?? '',
            status: event.type === 'workflow:node-failed' ? 'failure' : String(data.payload.status),
          });
          return;
        case 'workflow:tool-completed':
          toolSeconds.observe(seconds(data.payload), { workflow, tool: String(data.payload.toolId) });
          return;
        default:
          // Clones and subtasks end too; only the root's end is the run's.
          if (data.taskId === data.rootTaskId) runs.inc({ workflow, status: String(data.payload.status) });
      }
    },
  );
}

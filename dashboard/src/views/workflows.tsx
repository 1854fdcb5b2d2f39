import { useEffect, useState } from 'preact/hooks';
import { errorText, timeOf, useGateway, useGatewayEvents } from '../context.js';

interface WorkflowSummary {
  dir: string;
  id: string;
  description: string | null;
  nodes: Array<{ id: string; name: string | null; role: string; kind: string }>;
  edges: Array<{ from: string; to: string; label: string | null }>;
}

interface RunSummary {
  taskId: string;
  workflowId: string;
  startedAt: number;
  endedAt: number | null;
  status: 'running' | 'completed' | 'failed';
}

type NodeStatus = 'pending' | 'running' | 'completed' | 'failed';

const nodeWidth = 176;
const nodeHeight = 46;
const columnGap = 60;
const rowGap = 24;

/** Layers by longest path from the start nodes (back edges ignored), rows in manifest order. */
function layout(workflow: WorkflowSummary) {
  const layer = new Map<string, number>();
  const incoming = new Map<string, number>();
  for (const edge of workflow.edges) incoming.set(edge.to, (incoming.get(edge.to) ?? 0) + 1);
  const starts = workflow.nodes.filter((node) => node.role === 'start' || !incoming.get(node.id));
  const queue = starts.map((node) => node.id);
  for (const id of queue) layer.set(id, 0);
  let guard = 0;
  while (queue.length > 0 && guard++ < 10_000) {
    const id = queue.shift()!;
    for (const edge of workflow.edges.filter((candidate) => candidate.from === id)) {
      const next = (layer.get(id) ?? 0) + 1;
      if ((layer.get(edge.to) ?? -1) < next && next < workflow.nodes.length) {
        layer.set(edge.to, next);
        queue.push(edge.to);
      }
    }
  }
  const columns = new Map<number, string[]>();
  for (const node of workflow.nodes) {
    const column = layer.get(node.id) ?? 0;
    columns.set(column, [...(columns.get(column) ?? []), node.id]);
  }
  const rows = Math.max(1, ...[...columns.values()].map((ids) => ids.length));
  const height = rows * (nodeHeight + rowGap) + rowGap;
  const positions = new Map<string, { x: number; y: number }>();
  for (const [column, ids] of columns) {
    const offset = (height - ids.length * (nodeHeight + rowGap) + rowGap) / 2;
    ids.forEach((id, row) => {
      positions.set(id, {
        x: 20 + column * (nodeWidth + columnGap),
        y: offset + row * (nodeHeight + rowGap),
      });
    });
  }
  const width = 40 + Math.max(1, columns.size) * (nodeWidth + columnGap) - columnGap;
  return { positions, width, height };
}

function Dag(props: { workflow: WorkflowSummary; status: Map<string, NodeStatus>; path: Set<string> }) {
  const { positions, width, height } = layout(props.workflow);
  return (
    <svg
      class="dag"
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={`Workflow ${props.workflow.id}`}
    >
      <defs>
        <marker
          id="arrow"
          viewBox="0 0 10 10"
          refX="9"
          refY="5"
          markerWidth="7"
          markerHeight="7"
          orient="auto-start-reverse"
        >
          <path d="M 0 0 L 10 5 L 0 10 z" fill="var(--edge)" />
        </marker>
        <marker
          id="arrow-hot"
          viewBox="0 0 10 10"
          refX="9"
          refY="5"
          markerWidth="7"
          markerHeight="7"
          orient="auto-start-reverse"
        >
          <path d="M 0 0 L 10 5 L 0 10 z" fill="var(--accent)" />
        </marker>
      </defs>
      {props.workflow.edges.map((edge) => {
        const from = positions.get(edge.from);
        const to = positions.get(edge.to);
        if (!from || !to) return null;
        const hot = props.path.has(`${edge.from}>${edge.to}`);
        const x1 = from.x + nodeWidth;
        const y1 = from.y + nodeHeight / 2;
        const x2 = to.x;
        const y2 = to.y + nodeHeight / 2;
        const back = x2 <= x1;
        const d = back
          ? `M ${x1 - nodeWidth / 2} ${from.y + nodeHeight} C ${x1 - nodeWidth / 2} ${height}, ${x2 + nodeWidth / 2} ${height}, ${x2 + nodeWidth / 2} ${to.y + nodeHeight}`
          : `M ${x1} ${y1} C ${x1 + columnGap / 2} ${y1}, ${x2 - columnGap / 2} ${y2}, ${x2} ${y2}`;
        return (
          <g key={`${edge.from}>${edge.to}`}>
            <path
              class={hot ? 'edge hot' : 'edge'}
              d={d}
              marker-end={hot ? 'url(#arrow-hot)' : 'url(#arrow)'}
            />
            {edge.label && (
              <text class="edge-label" x={(x1 + x2) / 2} y={(y1 + y2) / 2 - 6} text-anchor="middle">
                {edge.label}
              </text>
            )}
          </g>
        );
      })}
      {props.workflow.nodes.map((node) => {
        const position = positions.get(node.id)!;
        const status = props.status.get(node.id) ?? 'pending';
        return (
          <g
            key={node.id}
            class={`node node-${status}`}
            transform={`translate(${position.x}, ${position.y})`}
            data-node-id={node.id}
            data-status={status}
          >
            <rect width={nodeWidth} height={nodeHeight} rx="10" />
            <text x="12" y="20" class="node-title">
              {(node.name ?? node.id).length > 22
                ? `${(node.name ?? node.id).slice(0, 21)}…`
                : (node.name ?? node.id)}
            </text>
            <text x="12" y="36" class="node-meta">
              {node.role} · {node.kind} · {status}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

export function WorkflowsView() {
  const gateway = useGateway();
  const [workflows, setWorkflows] = useState<WorkflowSummary[]>([]);
  const [selectedDir, setSelectedDir] = useState<string | undefined>();
  const [runs, setRuns] = useState<RunSummary[]>([]);
  const [runId, setRunId] = useState<string | undefined>();
  const [status, setStatus] = useState<Map<string, NodeStatus>>(new Map());
  const [path, setPath] = useState<Set<string>>(new Set());
  const [report, setReport] = useState<any>();
  const [input, setInput] = useState('{"request": "Create a note about tide pools"}');
  const [error, setError] = useState('');

  const loadRuns = () => gateway.call('workflow.runs', { limit: 20 }).then((result) => setRuns(result.runs));
  useEffect(() => {
    gateway.call('workflow.list').then(
      (result) => {
        setWorkflows(result.workflows);
        if (result.workflows[0]) setSelectedDir((current) => current ?? result.workflows[0].dir);
      },
      (failure) => setError(errorText(failure)),
    );
    loadRuns();
  }, []);

  const inspect = (taskId: string) =>
    gateway.call('workflow.inspect', { taskId }).then(
      (result) => {
        setReport(result.report);
        const next = new Map<string, NodeStatus>();
        for (const stage of result.report.history ?? [])
          next.set(
            stage.nodeId,
            stage.nodeStatus === 'success'
              ? 'completed'
              : stage.nodeStatus === 'failure'
                ? 'failed'
                : 'completed',
          );
        setStatus((current) => new Map([...current, ...next]));
        setPath(new Set((result.report.routingTrace ?? []).map((step: any) => `${step.from}>${step.to}`)));
      },
      () => undefined,
    );

  const selectRun = (run: RunSummary) => {
    const workflow = workflows.find((candidate) => candidate.id === run.workflowId);
    if (workflow) setSelectedDir(workflow.dir);
    setRunId(run.taskId);
    setStatus(new Map());
    setPath(new Set());
    setReport(undefined);
    inspect(run.taskId);
  };

  useGatewayEvents((event, payload) => {
    if (!event.startsWith('workflow.')) return;
    if (
      event === 'workflow.task-started' ||
      event === 'workflow.task-completed' ||
      event === 'workflow.task-failed'
    )
      loadRuns();
    if (!runId || payload.rootTaskId !== runId) return;
    const nodeId: string | undefined = payload.nodeId;
    if (event === 'workflow.node-started' && nodeId) {
      setStatus((current) => {
        const next = new Map(current).set(nodeId, 'running');
        return next;
      });
    } else if (event === 'workflow.node-completed' && nodeId) {
      setStatus((current) => new Map(current).set(nodeId, 'completed'));
    } else if (event === 'workflow.node-failed' && nodeId) {
      setStatus((current) => new Map(current).set(nodeId, 'failed'));
    } else if (event.startsWith('workflow.routing-') && nodeId) {
      const to = payload.payload?.to ?? payload.payload?.selected ?? payload.payload?.target;
      if (typeof to === 'string') setPath((current) => new Set(current).add(`${nodeId}>${to}`));
    } else if (
      (event === 'workflow.task-completed' || event === 'workflow.task-failed') &&
      payload.taskId === runId
    ) {
      inspect(runId);
    }
  });

  const start = (event: Event) => {
    event.preventDefault();
    if (!selectedDir) return;
    let parsed: unknown;
    try {
      parsed = input.trim() ? JSON.parse(input) : null;
    } catch {
      setError('The input is not valid JSON.');
      return;
    }
    setError('');
    setStatus(new Map());
    setPath(new Set());
    setReport(undefined);
    const taskId = `run-${Date.now().toString(36)}`;
    setRunId(taskId);
    gateway.call('workflow.run', { dir: selectedDir, input: parsed, wait: false, taskId }).then(
      () => loadRuns(),
      (failure) => setError(errorText(failure)),
    );
  };

  const workflow = workflows.find((candidate) => candidate.dir === selectedDir);
  const currentRun = runs.find((run) => run.taskId === runId);

  return (
    <div class="stack">
      <section class="card" aria-label="Workflow graph">
        <div class="row between wrap">
          <h2>Workflows</h2>
          <select
            aria-label="Workflow"
            value={selectedDir}
            onChange={(event) => setSelectedDir((event.target as HTMLSelectElement).value)}
          >
            {workflows.map((candidate) => (
              <option key={candidate.dir} value={candidate.dir}>
                {candidate.id} — {candidate.dir}
              </option>
            ))}
          </select>
        </div>
        {workflows.length === 0 && (
          <p class="muted">
            No workflow found. Put a workflow directory under the workspace or in ./workflows.
          </p>
        )}
        {workflow && (
          <>
            {workflow.description && <p class="muted">{workflow.description}</p>}
            <div class="dag-wrap">
              <Dag workflow={workflow} status={status} path={path} />
            </div>
            <form class="row wrap" onSubmit={start} aria-label="Start a run">
              <input
                aria-label="Run input (JSON)"
                class="mono"
                value={input}
                onInput={(event) => setInput((event.target as HTMLInputElement).value)}
              />
              <button type="submit" class="primary">
                Start run
              </button>
            </form>
            {currentRun && (
              <p class="small" role="status" id="run-status">
                Run <code>{currentRun.taskId}</code>:{' '}
                <span class={`badge run-${currentRun.status}`}>{currentRun.status}</span>
              </p>
            )}
          </>
        )}
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </section>
      <div class="split wide">
        <section class="card" aria-label="Runs">
          <h2>Runs</h2>
          <ul class="runs">
            {runs.length === 0 && <li class="muted">No runs yet.</li>}
            {runs.map((run) => (
              <li key={run.taskId}>
                <button
                  type="button"
                  class={run.taskId === runId ? 'session active' : 'session'}
                  onClick={() => selectRun(run)}
                >
                  <span>
                    {run.workflowId} <span class={`badge run-${run.status}`}>{run.status}</span>
                  </span>
                  <span class="muted small">
                    {run.taskId} · {timeOf(run.startedAt)}
                  </span>
                </button>
              </li>
            ))}
          </ul>
        </section>
        {report && (
          <section class="card" aria-label="Run record">
            <h2>Stages</h2>
            <ol class="log" aria-label="Stage records">
              {report.history.map((stage: any) => (
                <li key={stage.index}>
                  <span class={`badge ${stage.nodeStatus === 'success' ? 'run-completed' : 'run-failed'}`}>
                    {stage.nodeStatus}
                  </span>{' '}
                  <b>{stage.nodeId}</b>{' '}
                  <span class="muted small">{stage.completedAt - stage.startedAt} ms</span>
                  {stage.error && <span class="error small"> {stage.error.message}</span>}
                </li>
              ))}
            </ol>
            <h4>Routing path</h4>
            <p class="mono small">
              {report.routingTrace.length
                ? report.routingTrace
                    .map((step: any) => `${step.from} → ${step.to}${step.label ? ` [${step.label}]` : ''}`)
                    .join(' · ')
                : '—'}
            </p>
            <h4>Artifacts</h4>
            <ul class="log">
              {report.artifacts.length === 0 && <li class="muted">None.</li>}
              {report.artifacts.map((artifact: any, index: number) => (
                <li key={index}>
                  <span class="badge">{artifact.type}</span> {artifact.name ?? artifact.path ?? artifact.id}
                  {artifact.nodeId ? <span class="muted small"> from {artifact.nodeId}</span> : null}
                </li>
              ))}
            </ul>
            {report.output !== undefined && (
              <details>
                <summary>Output</summary>
                <pre>{JSON.stringify(report.output, null, 2)}</pre>
              </details>
            )}
          </section>
        )}
      </div>
    </div>
  );
}
